/** Time source. Injected wherever time decides something, so tests set the time instead of sleeping. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to. For tests and benchmarks. */
export class ManualClock implements Clock {
  private current: number;
  constructor(start: number | Date | string = Date.UTC(2026, 0, 1)) {
    this.current = typeof start === 'number' ? start : new Date(start).getTime();
  }
  now(): number {
    return this.current;
  }
  set(time: number | Date | string): void {
    this.current = typeof time === 'number' ? time : new Date(time).getTime();
  }
  advance(ms: number): void {
    this.current += ms;
  }
}
