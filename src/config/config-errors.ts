import type { z } from 'zod';
import { didYouMean } from '../core/did-you-mean.ts';

type Def = { type: string; shape?: Record<string, unknown>; innerType?: unknown; in?: unknown; valueType?: unknown; element?: unknown; options?: unknown[] };

function defOf(schema: unknown): Def | undefined {
  return (schema as { _zod?: { def?: Def } } | undefined)?._zod?.def;
}

/** Unwraps defaults, optionals and pipes; a union gives each of its options. */
function unwrap(node: unknown): unknown[] {
  const def = defOf(node);
  if (!def) return [];
  if (def.innerType) return unwrap(def.innerType);
  if (def.type === 'pipe' && def.in) return unwrap(def.in);
  if (def.type === 'union' && def.options) return def.options.flatMap(unwrap);
  return [node];
}

/** The schema nodes one key below `nodes` (an object's property, a record's value, an array's element), not unwrapped. */
function childrenOf(nodes: readonly unknown[], key: PropertyKey): unknown[] {
  return nodes.flatMap(unwrap).flatMap((node) => {
    const def = defOf(node)!;
    if (def.type === 'object' && def.shape) return def.shape[String(key)] ? [def.shape[String(key)]] : [];
    if (def.type === 'record') return [def.valueType];
    if (def.type === 'array') return [def.element];
    return [];
  });
}

/** The schema nodes at `keyPath` (through defaults, optionals, records, arrays and unions), unwrapped. */
function nodesAt(schema: unknown, keyPath: readonly PropertyKey[]): unknown[] {
  return keyPath.reduce<unknown[]>((nodes, key) => childrenOf(nodes, key), [schema]).flatMap(unwrap);
}

/** The object keys the schema allows at `keyPath` (through defaults, optionals, records, arrays and unions). */
export function knownKeysAt(schema: unknown, keyPath: readonly PropertyKey[]): string[] {
  return [...new Set(nodesAt(schema, keyPath).flatMap((node) => Object.keys(defOf(node)?.shape ?? {})))];
}

/** The keys an object schema cannot do without (no default, not optional). */
function requiredKeys(node: unknown): string[] {
  const shape = defOf(node)?.shape ?? {};
  return Object.keys(shape).filter((k) => !['optional', 'default', 'prefault'].includes(defOf(shape[k])?.type ?? ''));
}

function valueAt(raw: unknown, keyPath: readonly PropertyKey[]): { found: boolean; value?: unknown } {
  let node = raw;
  for (const key of keyPath) {
    if (node === null || typeof node !== 'object' || !(String(key) in (node))) return { found: false };
    node = (node as Record<string, unknown>)[String(key)];
  }
  return { found: true, value: node };
}

const EXPECTED: Record<string, string> = {
  number: 'a number', int: 'a whole number', string: 'a string', boolean: 'true or false', object: 'an object ({ ... })',
  array: 'a list ([ ... ])', record: 'an object ({ ... })',
};

function shown(value: unknown): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value);
  // JSON.stringify gives undefined only for functions and symbols, which String() shows as they are.
  // eslint-disable-next-line @typescript-eslint/no-base-to-string
  return text === undefined ? String(value) : text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/**
 * One line per problem: the key, where its value came from, and what was wrong, e.g.
 * `gateway.port (from SWITCHBOARD_PORT): expected a number, got "abc"` or
 * `gateway.prot: unknown key "prot" (did you mean "port"?)`.
 */
export function describeConfigIssue(issue: z.core.$ZodIssue, schema: unknown, raw: unknown, sources: ReadonlyMap<string, string>): string {
  const key = issue.path.map(String).join('.') || '(root)';
  const source = sources.get(key);
  const where = source ? ` (from ${source})` : '';
  const at = valueAt(raw, issue.path);
  let message = issue.message;
  if (issue.code === 'invalid_union' && issue.errors.length) return describeUnionIssue(issue, schema, raw, sources);
  if (issue.code === 'invalid_key') {
    // The path ends with the key itself; joined with dots, "a.b" would read as two keys.
    const parent = issue.path.slice(0, -1).map(String).join('.') || '(root)';
    const parentSource = sources.get(parent);
    const reasons = issue.issues.map((inner) => inner.message).join('; ');
    return `${parent}${parentSource ? ` (from ${parentSource})` : ''}: ${shown(String(issue.path[issue.path.length - 1]))} is not a valid name: ${reasons}`;
  }
  if (issue.code === 'unrecognized_keys') {
    const known = knownKeysAt(schema, issue.path);
    message = issue.keys.map((k) => {
      const guess = didYouMean(k, known);
      return `unknown key "${k}"${guess ? ` (did you mean "${guess}"?)` : ''}`;
    }).join('; ');
  } else if (issue.code === 'invalid_type') {
    message = `expected ${EXPECTED[issue.expected] ?? issue.expected}, got ${shown(at.value)}`;
  } else if (issue.code === 'invalid_value' && issue.values.length) {
    const options = issue.values.map((v) => JSON.stringify(v));
    const guess = typeof at.value === 'string' ? didYouMean(at.value, issue.values.map(String)) : undefined;
    message = `expected ${options.length === 1 ? options[0] : `one of ${options.join(', ')}`}, got ${shown(at.value)}${guess ? ` (did you mean "${guess}"?)` : ''}`;
  } else if (at.found && !/got |received /.test(message)) {
    message = `${message.replace(/^Invalid input: /, '')}, got ${shown(at.value)}`;
  }
  return `${key}${where}: ${message}`;
}

/**
 * A value that fits none of a union's shapes (an MCP server with `command` or with `url`): the shape it comes
 * closest to (fewest problems, so a value with `url` is read as an HTTP server) explains what is wrong inside
 * it; when two shapes are equally close, the message names them all.
 */
function describeUnionIssue(issue: z.core.$ZodIssueInvalidUnion, schema: unknown, raw: unknown, sources: ReadonlyMap<string, string>): string {
  const value = valueAt(raw, issue.path).value;
  const key = issue.path.map(String).join('.') || '(root)';
  const source = sources.get(key);
  const subject = `${key}${source ? ` (from ${source})` : ''}`;
  const mixed = mixedShapes(schema, issue.path, value);
  if (mixed) return `${subject}: expected ${mixed.join(' or ')}, not both`;
  const fewest = Math.min(...issue.errors.map((e) => e.length));
  const closest = issue.errors.filter((e) => e.length === fewest);
  if (closest.length === 1) {
    return closest[0]!.map((inner) => describeConfigIssue({ ...inner, path: [...issue.path, ...inner.path] }, schema, raw, sources)).join('\n  - ');
  }
  const shapes = issue.errors.map((branch) => {
    const missing = branch.filter((i) => i.code === 'invalid_type' && i.path.length === 1).map((i) => String(i.path[0]));
    const rootType = branch.find((i) => i.code === 'invalid_type' && i.path.length === 0) as { expected?: string } | undefined;
    return missing.length ? `an object with ${missing.map((m) => `"${m}"`).join(' and ')}` : (EXPECTED[rootType?.expected ?? ''] ?? rootType?.expected ?? 'another shape');
  });
  return `${subject}: expected ${[...new Set(shapes)].join(' or ')}, got ${shown(value)}`;
}

/**
 * A value holding the required key of two or more of a union's shapes (an MCP server with both `command` and
 * `url`): each such key with the shape's description, e.g. `"command" (stdio)`; undefined otherwise.
 */
function mixedShapes(schema: unknown, keyPath: readonly PropertyKey[], value: unknown): string[] | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const present = unionOptionsAt(schema, keyPath).flatMap((option) => {
    const keys = requiredKeys(option).filter((k) => k in value);
    const label = (option as { description?: string }).description;
    return keys.length ? [`${keys.map((k) => `"${k}"`).join(' and ')}${label ? ` (${label})` : ''}`] : [];
  });
  return present.length >= 2 ? present : undefined;
}

/** The options of the union at `keyPath`, unwrapped (none when there is no union there). */
function unionOptionsAt(schema: unknown, keyPath: readonly PropertyKey[]): unknown[] {
  const here = keyPath.length ? childrenOf(nodesAt(schema, keyPath.slice(0, -1)), keyPath[keyPath.length - 1]!) : [schema];
  return here.flatMap((node) => {
    let inner = node;
    while (defOf(inner)?.innerType) inner = defOf(inner)!.innerType;
    const def = defOf(inner);
    return def?.type === 'union' && def.options ? def.options.flatMap(unwrap) : [];
  });
}

/** A JSON5 syntax error with the offending line and a caret under the column. */
export function describeSyntaxError(file: string, text: string, error: Error & { lineNumber?: number; columnNumber?: number }): string {
  const reason = error.message.replace(/^JSON5: /, '').replace(/ at \d+:\d+$/, '');
  const line = error.lineNumber;
  if (!line) return `Cannot parse ${file}: ${reason}. The file must be JSON or JSON5.`;
  const column = error.columnNumber ?? 1;
  const source = (text.split(/\r?\n/)[line - 1] ?? '').replace(/\t/g, ' ');
  const gutter = String(line);
  return [
    `Cannot parse ${file}: ${reason} at line ${line}, column ${column}:`,
    `  ${gutter} | ${source}`,
    `  ${' '.repeat(gutter.length)} | ${' '.repeat(Math.max(0, column - 1))}^`,
    'The file must be JSON or JSON5 (comments, unquoted keys and trailing commas are fine).',
  ].join('\n');
}
