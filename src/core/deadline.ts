/** What {@link withDeadline} settles with when the time ran out first. */
export const TIMED_OUT: unique symbol = Symbol('timed out');

/** The timer functions a deadline uses (tests pass manual ones). */
export interface DeadlineTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: DeadlineTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * Waits for `work` at most `ms`: settles as `work` does, or with {@link TIMED_OUT} when the time runs out first
 * (`work` goes on; the caller decides what to do with it). The timer is cleared either way.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, timers: DeadlineTimers = realTimers): Promise<T | typeof TIMED_OUT> {
  let handle: unknown;
  const deadline = new Promise<typeof TIMED_OUT>((resolve) => { handle = timers.setTimeout(() => resolve(TIMED_OUT), ms); });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    timers.clearTimeout(handle);
  }
}
