import { readFileSync } from 'node:fs';
import path from 'node:path';
import JSON5 from 'json5';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { configSchema } from '../../src/config/schema.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const EXAMPLE = path.resolve(import.meta.dirname, '../../switchboard.example.json5');

type Def = { type: string; shape?: Record<string, unknown>; innerType?: unknown; in?: unknown; valueType?: unknown; element?: unknown; options?: unknown[] };
const defOf = (node: unknown): Def => (node as { _zod: { def: Def } })._zod.def;

/** Every object key the schema has, with its path and whether it is under a record or a list (a user-named entry). */
function schemaKeys(node: unknown, at: string[] = [], inEntry = false, out: { path: string[]; inEntry: boolean; hasDefault: boolean }[] = []) {
  const def = defOf(node);
  if (def.type === 'default' || def.type === 'prefault' || def.type === 'optional' || def.type === 'nullable') return schemaKeys(def.innerType, at, inEntry, out);
  if (def.type === 'pipe') return schemaKeys(def.in, at, inEntry, out);
  if (def.type === 'union') def.options!.forEach((option) => schemaKeys(option, at, inEntry, out));
  if (def.type === 'record') schemaKeys(def.valueType, [...at, '*'], true, out);
  if (def.type === 'array') schemaKeys(def.element, [...at, '[]'], true, out);
  if (def.type === 'object') {
    for (const [key, child] of Object.entries(def.shape!)) {
      out.push({ path: [...at, key], inEntry, hasDefault: ['default', 'prefault'].includes(defOf(child).type) });
      schemaKeys(child, [...at, key], inEntry, out);
    }
  }
  return out;
}

function valueAt(value: unknown, keyPath: readonly string[]): { found: boolean } {
  let node = value;
  for (const key of keyPath) {
    if (node === null || typeof node !== 'object' || !(key in node)) return { found: false };
    node = (node as Record<string, unknown>)[key];
  }
  return { found: true };
}

describe('switchboard.example.json5 (README: "lists them all with their defaults")', () => {
  const tmp = useTempDir();

  const text = readFileSync(EXAMPLE, 'utf8');
  const example = JSON5.parse<Record<string, unknown>>(text);
  /** `key:` written anywhere in the file, commented examples included. */
  const written = (key: string) => new RegExp(`(^|[\\s{,.])${key.replace(/\$/g, '\\$')}\\s*:`, 'm').test(text);

  it('is a valid configuration whose values are the defaults', () => {
    const load = (configPath?: string) => {
      const { configPath: _file, session: { reset, ...session }, ...rest } = loadConfig({ cwd: tmp.dir, env: {}, dotenv: false, ...(configPath ? { configPath } : {}) });
      return { config: { ...rest, session }, reset };
    };
    const fromExample = load(EXAMPLE);
    const fromNothing = load();
    expect(fromExample.config).toEqual(fromNothing.config);
    // `reset` is kept as written (merged over the built-in policy when used): the example spells out SPEC's default.
    expect(fromNothing.reset).toEqual({});
    expect(fromExample.reset).toEqual({ mode: 'daily', atHour: 4, idleMinutes: 0 });
  });

  it('has every top-level key of the schema, with its default value or as a commented example', () => {
    const topLevel = Object.keys(defOf(configSchema).shape!);
    expect(topLevel).toEqual(expect.arrayContaining(['bindings', 'mcp', 'cluster', 'limits', 'logLevel', 'session', 'backgroundExecution']));
    for (const key of topLevel) expect(written(key), `top-level key "${key}" in the example`).toBe(true);
    const withDefault = schemaKeys(configSchema).filter((k) => k.path.length === 1 && k.hasDefault).map((k) => k.path[0]);
    for (const key of withDefault) expect(key! in example, `top-level key "${key}" set to its default`).toBe(true);
  });

  it('its commented bindings, MCP servers and agents are valid when uncommented', () => {
    const lines = text.split('\n');
    const commented = (key: string): Record<string, unknown> => {
      const start = lines.findIndex((line) => line.startsWith(`    // ${key}: `) || line.startsWith(`  // ${key}: `));
      expect(start, `a commented ${key} example`).toBeGreaterThan(-1);
      let block = '';
      for (const line of lines.slice(start)) {
        block += `${line.replace(/^\s*\/\/ ?/, '')}\n`;
        try {
          return JSON5.parse<Record<string, unknown>>(`{${block}}`);
        } catch { /* not closed yet */ }
      }
      throw new Error(`the commented ${key} example never closes`);
    };
    const bindings = commented('bindings').bindings as { match: Record<string, unknown> }[];
    expect(bindings.map((b) => Object.keys(b.match).sort())).toEqual([['channel', 'peer'], ['channel', 'guildId'], ['channel']]);
    const mcp = commented('mcp').mcp as { servers: Record<string, Record<string, unknown>> };
    expect(Object.values(mcp.servers).map((server) => ('command' in server ? 'stdio' : 'url' in server ? 'http' : '?'))).toEqual(['stdio', 'http']);
    const config = loadConfig({
      cwd: tmp.dir, dotenv: false, env: { GITHUB_TOKEN: 'ghp-test', SEARCH_TOKEN: 'search-test' },
      overrides: { stateDir: path.join(tmp.dir, 'data'), agents: { list: commented('list').list }, bindings, mcp },
    });
    expect(config.agents.map((a) => a.id)).toEqual(['main', 'work']);
    expect(config.bindings).toHaveLength(3);
    expect(Object.keys(config.mcp.servers)).toEqual(['github', 'search']);
  });

  it('has every nested key: set to its default, or (under a named entry, or without a default) as a commented example', () => {
    const keys = schemaKeys(configSchema);
    const missing = keys.filter((k) => (k.hasDefault && !k.inEntry ? !valueAt(example, k.path).found : !written(k.path.at(-1)!)));
    expect(missing.map((k) => k.path.join('.'))).toEqual([]);
    expect(valueAt(example, ['session', 'tokenBudget']).found).toBe(true);
    for (const key of ['command', 'url', 'headers', 'guildId', 'teamId', 'peer', 'accountId']) expect(written(key), key).toBe(true);
  });
});
