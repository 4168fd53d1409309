import type { ManualClock } from '../../src/core/clock.ts';

/** Lets pending promise callbacks and I/O-free async steps run. */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Timers on a {@link ManualClock} that fire only when the test moves it with {@link advance}: no real waiting. */
export class ClockedTimers {
  private pending: { at: number; fn: () => void; seq: number }[] = [];
  private seq = 0;
  constructor(private readonly clock: ManualClock) {}

  setTimeout = (fn: () => void, ms: number): unknown => {
    const timer = { at: this.clock.now() + Math.max(0, ms), fn, seq: this.seq++ };
    this.pending.push(timer);
    return timer;
  };

  clearTimeout = (handle: unknown): void => {
    this.pending = this.pending.filter((t) => t !== handle);
  };

  get size(): number {
    return this.pending.length;
  }

  /** Moves the clock by `ms`, firing each timer at its time, in order, letting async work settle after each. */
  async advance(ms: number): Promise<void> {
    const end = this.clock.now() + ms;
    await settle();
    for (;;) {
      const next = [...this.pending].sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next || next.at > end) break;
      this.pending.splice(this.pending.indexOf(next), 1);
      if (next.at > this.clock.now()) this.clock.set(next.at);
      next.fn();
      await settle();
    }
    this.clock.set(end);
  }
}
