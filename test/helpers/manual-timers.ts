import type { SupervisorTimers } from '../../src/gateway/channel-supervisor.ts';

/** Timers that fire only when the test says so: `advance(ms)` runs what falls due, in order. */
export class ManualTimers implements SupervisorTimers {
  private now = 0;
  private nextId = 1;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.pending.set(id, { at: this.now + ms, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }

  /** Delays of the timers waiting now, shortest first. */
  delays(): number[] {
    return [...this.pending.values()].map((t) => t.at - this.now).sort((a, b) => a - b);
  }

  /** Moves time on by `ms` and runs every timer due by then (not those they schedule beyond it). */
  advance(ms: number): void {
    this.now += ms;
    const due = [...this.pending.entries()].filter(([, t]) => t.at <= this.now).sort(([, a], [, b]) => a.at - b.at);
    for (const [id, timer] of due) {
      this.pending.delete(id);
      timer.fn();
    }
  }
}
