/** One formatter for every count: `toLocaleString` builds a new one per call (some 10 µs on Node 20). */
const COUNT = new Intl.NumberFormat('en-US');

/** `1,234`: a count as every message shows it (en-US grouping). */
export function formatCount(count: number): string {
  return COUNT.format(count);
}

/** `1 message`, `2 messages`, `1,234 tokens`: a count with its noun in the right number. */
export function plural(count: number, singular: string, pluralForm = `${singular}s`): string {
  return `${formatCount(count)} ${count === 1 ? singular : pluralForm}`;
}
