/**
 * A value as JSON text PostgreSQL's `jsonb` takes: it refuses NUL characters and unpaired surrogates (both
 * can come from a platform or a model), so strings are made well-formed (an unpaired surrogate becomes
 * U+FFFD) and NUL becomes U+FFFD. Everything else is kept as it is.
 */
export function jsonbText(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'string' ? storableString(v) : v));
}

const UNPAIRED_OR_NUL = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]|\u0000/g;

/** A string as PostgreSQL's `text` and `jsonb` can hold it (see {@link jsonbText}). */
export function storableString(text: string): string {
  return text.replace(UNPAIRED_OR_NUL, '\ufffd');
}
