/** One sample of a Prometheus text exposition. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)/y;

/**
 * Parses the Prometheus text format (version 0.0.4) strictly: every line is a comment (`# HELP`,
 * `# TYPE` with a known type), blank, or a sample whose labels and value are well formed. Throws on
 * anything else, naming the line.
 */
export function parsePrometheus(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) ?(.*)$/.exec(line);
      if (!m) throw new Error(`line ${i + 1}: bad comment: ${line}`);
      if (m[1] === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(m[3] ?? '')) throw new Error(`line ${i + 1}: bad type: ${line}`);
        types.set(m[2] as string, m[3] as string);
      }
      return;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`line ${i + 1}: not a sample: ${line}`);
    const labels: Record<string, string> = {};
    if (m[2]) {
      LABEL.lastIndex = 0;
      let consumed = 0;
      for (let l = LABEL.exec(m[2]); l; l = LABEL.exec(m[2])) {
        labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
        consumed = LABEL.lastIndex;
      }
      if (consumed !== m[2].length) throw new Error(`line ${i + 1}: bad labels: ${line}`);
    }
    const raw = m[3] as string;
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    if (Number.isNaN(value) && raw !== 'NaN') throw new Error(`line ${i + 1}: bad value: ${line}`);
    samples.push({ name: m[1] as string, labels, value });
  });
  return { samples, types };
}

/** Sum of the samples of one metric, optionally filtered by labels. */
export function sumOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((n, s) => n + s.value, 0);
}
