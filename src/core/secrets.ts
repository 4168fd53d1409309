/** Replaces every occurrence of a known secret value in text with `[redacted]`. */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length >= 6 && out.includes(secret)) out = out.split(secret).join('[redacted]');
  }
  return out;
}

/** Deep copy of a log object with secret values scrubbed from every string (bounded depth). */
export function scrubValue(value: unknown, secrets: readonly string[], depth = 0): unknown {
  if (typeof value === 'string') return scrubSecrets(value, secrets);
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, secrets, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrubValue(v, secrets, depth + 1);
  return out;
}
