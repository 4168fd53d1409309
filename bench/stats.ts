/** Percentile of sorted-or-not samples (nearest rank). */
export function percentile(samples: number[], p: number): number {
  if (!samples.length) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export function mean(samples: number[]): number {
  return samples.reduce((a, b) => a + b, 0) / (samples.length || 1);
}

export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Nanosecond-resolution milliseconds. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
