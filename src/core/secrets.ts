/** Replaces every occurrence of a known secret value in text with `[redacted]`. */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length >= 6 && out.includes(secret)) out = out.split(secret).join('[redacted]');
  }
  return out;
}

/** An error as a log line holds it: every field a reader needs, and its cause chain. */
export interface SerializedError {
  type: string;
  message: string;
  stack?: string;
  code?: unknown;
  cause?: unknown;
  /** Other own fields (status, retryable, issues...), and `errors` of an AggregateError. */
  [field: string]: unknown;
}

const MAX_DEPTH = 6;

/**
 * Deep copy of a log object with secret values scrubbed from every string (bounded depth). Errors anywhere
 * in it become {@link SerializedError}s (a plain copy would keep only their enumerable fields, losing
 * `message` and `stack`).
 */
export function scrubValue(value: unknown, secrets: readonly string[], depth = 0): unknown {
  if (typeof value === 'string') return secrets.length ? scrubSecrets(value, secrets) : value;
  if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return serializeError(value, secrets, depth);
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, secrets, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrubValue(v, secrets, depth + 1);
  return out;
}

/**
 * An error for a log line: `type`, `message`, `stack`, `code`, `cause` (serialized the same way, to a
 * bounded depth) and its other own fields, with secrets scrubbed from every string.
 */
export function serializeError(error: Error, secrets: readonly string[] = [], depth = 0): SerializedError {
  const scrub = (v: unknown) => scrubValue(v, secrets, depth + 1);
  const out: SerializedError = {
    type: error.constructor?.name && error.constructor.name !== 'Object' ? error.constructor.name : error.name,
    message: scrub(String(error.message ?? '')) as string,
  };
  if (typeof error.stack === 'string') out.stack = scrub(error.stack) as string;
  for (const [k, v] of Object.entries(error)) {
    if (k === 'message' || k === 'stack' || k === 'cause' || typeof v === 'function') continue;
    out[k] = scrub(v);
  }
  const code = (error as { code?: unknown }).code;
  if (code !== undefined) out.code = scrub(code);
  if (error.cause !== undefined) {
    // Past the depth limit a cause becomes one line, scrubbed like every other string (it may quote a secret).
    const cause: unknown = error.cause;
    const oneLine = cause instanceof Error ? `${cause.name}: ${cause.message}`
      : typeof cause === 'string' ? cause
        : typeof cause === 'number' || typeof cause === 'boolean' || typeof cause === 'bigint' ? cause.toString() : `[${typeof cause}]`;
    out.cause = depth >= MAX_DEPTH ? scrub(oneLine) : scrub(cause);
  }
  if (error instanceof AggregateError && Array.isArray(error.errors)) out.errors = error.errors.slice(0, 10).map(scrub);
  return out;
}
