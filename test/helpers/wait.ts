/**
 * Polls `probe` (every 5 ms, at most `tries` times) until it gives a value other than undefined or false, and
 * returns it; for waiting on another process or a background run, never on the clock.
 */
export async function until<T>(probe: () => T | undefined | false | Promise<T | undefined | false>, what: string, tries = 4000): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await Promise.resolve().then(probe).catch(() => undefined);
    if (value !== undefined && value !== false) return value;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}
