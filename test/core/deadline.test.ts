import { describe, expect, it } from 'vitest';
import { TIMED_OUT, withDeadline, type DeadlineTimers } from '../../src/core/deadline.ts';

/** Timers the test fires itself. */
function manualTimers(): DeadlineTimers & { fire(): void; pending: number } {
  const timers = new Map<number, () => void>();
  let next = 0;
  return {
    setTimeout: (callback) => { timers.set(++next, callback); return next; },
    clearTimeout: (handle) => { timers.delete(handle as number); },
    fire: () => { for (const [id, callback] of [...timers]) { timers.delete(id); callback(); } },
    get pending() { return timers.size; },
  };
}

describe('withDeadline', () => {
  it('settles with the work when it finishes first, and clears its timer', async () => {
    const timers = manualTimers();
    await expect(withDeadline(Promise.resolve('done'), 1000, timers)).resolves.toBe('done');
    expect(timers.pending).toBe(0);
  });

  it('settles with TIMED_OUT when the time runs out first, whatever the work does later', async () => {
    const timers = manualTimers();
    let finish!: (v: string) => void;
    const result = withDeadline(new Promise<string>((r) => { finish = r; }), 1000, timers);
    timers.fire();
    finish('late');
    await expect(result).resolves.toBe(TIMED_OUT);
  });

  it('passes the work\'s rejection on, and clears its timer', async () => {
    const timers = manualTimers();
    await expect(withDeadline(Promise.reject(new Error('broken')), 1000, timers)).rejects.toThrow('broken');
    expect(timers.pending).toBe(0);
  });
});
