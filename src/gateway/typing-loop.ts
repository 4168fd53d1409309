/** Timer functions of the typing loop, injected so tests decide when a refresh falls due. */
export interface TypingTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: TypingTimers = {
  setTimeout: (fn, ms) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** How long a typing indicator lasts when the adapter does not say (Telegram's 5 s, the shortest of the platforms). */
export const DEFAULT_TYPING_LAPSE_MS = 5000;

/** How long the last refresh of a stopped loop may hold the reply back (a request in flight, bounded). */
const SETTLE_MS = 1000;

/**
 * How often an indicator that lapses after `lapseMs` is shown again: a fifth earlier, at least 1 s earlier,
 * so that a refresh's own round trip never lets it lapse (Telegram 5 s → 4 s, Discord 10 s → 8 s).
 */
export function typingRefreshMs(lapseMs: number): number {
  return Math.max(500, lapseMs - Math.max(1000, Math.round(lapseMs / 5)));
}

/** A running typing loop. */
export interface TypingLoop {
  /**
   * Ends the loop: no refresh is sent after this call. Resolves once a refresh still in flight has settled
   * (at most ~1 s), so a reply sent after it is not followed by an indicator the platform took later.
   */
  stop(): Promise<void>;
}

/**
 * Shows an indicator at once and again every `intervalMs` until stopped. `show` failures are the caller's to
 * log (`onError`); the loop goes on regardless, since a turn's typing is best effort.
 */
export function startTypingLoop(show: () => Promise<void>, intervalMs: number, onError: (err: unknown) => void, timers: TypingTimers = realTimers): TypingLoop {
  let stopped = false;
  let handle: unknown;
  let inFlight: Promise<void> | undefined;
  const tick = () => {
    if (stopped) return;
    // A synchronous throw is a failed refresh too.
    const call = new Promise<void>((resolve) => resolve(show())).catch(onError);
    const settled = call.then(() => { if (inFlight === settled) inFlight = undefined; });
    inFlight = settled;
    handle = timers.setTimeout(tick, intervalMs);
  };
  tick();
  return {
    stop: async () => {
      if (!stopped) {
        stopped = true;
        timers.clearTimeout(handle);
      }
      const pending = inFlight;
      if (!pending) return;
      let bound: unknown;
      await Promise.race([pending, new Promise<void>((resolve) => { bound = timers.setTimeout(resolve, SETTLE_MS); })]);
      timers.clearTimeout(bound);
    },
  };
}
