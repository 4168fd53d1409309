import { HttpError, type Transformer } from 'grammy';

/** Timers of the pauses (tests pass their own). */
export interface PollingRetryTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: PollingRetryTimers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout) };

/** grammy's pause after a failed getUpdates, and the first of auto-retry's after a 5xx. */
const PAUSE_MS = 3000;

/** The abort signal grammy hands to a transformer. */
type CallSignal = Parameters<Transformer>[3];

/** Waits `ms` on `timers`; rejects at once when `signal` aborts (the bot was stopped). */
function pause(timers: PollingRetryTimers, ms: number, signal: CallSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const cancelled = () => new Error('getUpdates was cancelled while waiting to try again');
    if (signal?.aborted) return reject(cancelled());
    const handle = timers.setTimeout(() => { signal?.removeEventListener('abort', abort); resolve(); }, ms);
    function abort() { timers.clearTimeout(handle); reject(cancelled()); }
    signal?.addEventListener('abort', abort, { once: true });
  });
}

/**
 * A grammy API transformer that tries a failed `getUpdates` again itself, with the pauses grammy's polling loop
 * and auto-retry took, but on `timers` (so that tests need not wait them out): 3 s after a network error
 * (grammy's pause); after 5xx answers in a row 3, 6, 12 and then 27 s (auto-retry's 3, 6, 12 and 24 s, and
 * grammy's 3 s after auto-retry gave up), over again while they last. A stopped bot ends a pause at once. Any
 * other answer or error is handed on as it is (grammy throws on a 401 or 409 and the polling watch stops on a
 * 404; a 429 keeps auto-retry's `retry_after`). Install it just outside `pollingWatch`, so that the watch still
 * sees each attempt. Other methods pass through.
 */
export function pollingRetry(timers: PollingRetryTimers = realTimers): Transformer {
  return (async (prev, method, payload, signal) => {
    if (method !== 'getUpdates') return prev(method, payload, signal);
    let serverErrors = 0;
    for (;;) {
      let response: unknown;
      try {
        response = await prev(method, payload, signal);
      } catch (error) {
        if (!(error instanceof HttpError) || signal?.aborted) throw error;
        serverErrors = 0;
        await pause(timers, PAUSE_MS, signal);
        continue;
      }
      const answer = response as { ok?: unknown; error_code?: unknown } | null | undefined;
      if (!answer || answer.ok !== false || !(Number(answer.error_code) >= 500)) return response;
      serverErrors++;
      const step = (serverErrors - 1) % 4;
      await pause(timers, PAUSE_MS * (step === 3 ? 9 : 2 ** step), signal);
    }
  }) as Transformer;
}
