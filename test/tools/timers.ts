import type { TimeoutHandle } from '../../src/tools/timeout.ts';

/** Timeouts that fire only when the test says so (no waiting for time to pass). */
export interface ManualTimers {
  timeout(ms: number): TimeoutHandle;
  /** Durations of the timers armed and not yet cleared or fired, in arming order. */
  pending(): number[];
  /** Fires every pending timer. */
  fireAll(): void;
  /** Fires the pending timers of this duration. */
  fire(ms: number): void;
  /** Resolves once at least `n` timers are pending. */
  waitForPending(n: number): Promise<void>;
}

export function manualTimers(): ManualTimers {
  const armed = new Set<{ ms: number; controller: AbortController }>();
  const timers: ManualTimers = {
    timeout(ms) {
      const t = { ms, controller: new AbortController() };
      armed.add(t);
      return { signal: t.controller.signal, clear: () => { armed.delete(t); } };
    },
    pending: () => [...armed].map((t) => t.ms),
    fireAll: () => timers.fire(-1),
    fire(ms) {
      for (const t of [...armed]) {
        if (ms !== -1 && t.ms !== ms) continue;
        armed.delete(t);
        t.controller.abort(new Error('timeout'));
      }
    },
    async waitForPending(n) {
      for (let i = 0; armed.size < n; i++) {
        if (i > 100_000) throw new Error(`only ${armed.size} timers armed`);
        await new Promise((r) => setImmediate(r));
      }
    },
  };
  return timers;
}
