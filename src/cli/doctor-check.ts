/** One line of `switchboard doctor`: `ok`, `warn` or `FAIL`, what was checked, and what to do. */
export interface Check {
  name: string;
  ok: boolean | 'warn';
  detail: string;
}
