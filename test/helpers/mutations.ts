import fc from 'fast-check';

/** A small value of any JSON type (and `undefined`), the stuff malformed payloads are made of. */
export const junk: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null), fc.constant(undefined), fc.boolean(), fc.integer(), fc.double(), fc.constant(''),
  fc.string({ maxLength: 12 }), fc.constant('0'), fc.constant(-1), fc.constant(Number.MAX_SAFE_INTEGER),
  fc.constant([]), fc.constant({}), fc.constant([null]), fc.array(fc.oneof(fc.integer(), fc.string({ maxLength: 4 }), fc.constant(null)), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(fc.integer(), fc.string({ maxLength: 4 }), fc.constant(null)), { maxKeys: 3 }),
);

/** Every path (object keys and array indexes) inside a value, parents before children. */
export function pathsOf(value: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const path = [...prefix, Array.isArray(value) ? Number(k) : k];
      out.push(path);
      pathsOf(v, path, out);
    }
  }
  return out;
}

function apply(target: unknown, path: (string | number)[], op: 'delete' | 'set', value: unknown): unknown {
  if (path.length === 0) return op === 'delete' ? undefined : value;
  let node = target as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) {
    const next = node?.[key];
    if (!next || typeof next !== 'object') return target;
    node = next as Record<string | number, unknown>;
  }
  const last = path[path.length - 1]!;
  if (op === 'delete') delete node[last];
  else node[last] = value;
  return target;
}

/**
 * Variants of a well-formed payload: itself, a few of its fields deleted or replaced by values of another
 * type (nested fields too), or the whole of it replaced by something else entirely.
 */
export function mutated<T>(template: T): fc.Arbitrary<unknown> {
  const paths = pathsOf(template);
  if (paths.length === 0) return fc.oneof(fc.constant(template).map((t) => structuredClone(t)), junk);
  const edit = fc.record({ path: fc.constantFrom(...paths), op: fc.constantFrom('delete' as const, 'set' as const), value: junk });
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant(template).map((t) => structuredClone(t)) },
    { weight: 2, arbitrary: junk },
    { weight: 7, arbitrary: fc.array(edit, { minLength: 1, maxLength: 3 }).map((edits) => edits.reduce<unknown>((acc, e) => apply(acc, e.path, e.op, e.value), structuredClone(template))) },
  );
}
