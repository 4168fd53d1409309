import { describe, expect, it } from 'vitest';
import { LaneScheduler } from '../../src/gateway/lanes.ts';

function deferred() {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}
const tick = () => new Promise((r) => setImmediate(r));

describe('LaneScheduler', () => {
  it('runs one job at a time per key, in arrival order, under concurrent sends', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 8 });
    const order: string[] = [];
    let running = 0;
    let overlap = false;
    await Promise.all(Array.from({ length: 50 }, (_, i) => new Promise<void>((done) => {
      lanes.enqueue('k', async () => {
        running++;
        if (running > 1) overlap = true;
        await tick();
        order.push(String(i));
        running--;
        done();
      });
    })));
    expect(overlap).toBe(false);
    expect(order).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
  });

  it('runs different keys in parallel up to maxConcurrent', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 3 });
    const gates = Array.from({ length: 6 }, deferred);
    let running = 0;
    let peak = 0;
    const finished: Promise<void>[] = [];
    gates.forEach((gate, i) => finished.push(new Promise((done) => lanes.enqueue(`k${i}`, async () => {
      running++;
      peak = Math.max(peak, running);
      await gate.promise;
      running--;
      done();
    }))));
    await tick();
    expect(lanes.runningCount).toBe(3);
    gates.forEach((g) => g.resolve());
    await Promise.all(finished);
    expect(peak).toBe(3);
  });

  it('goes on after a failing job, and keeps the order', async () => {
    const errors: unknown[] = [];
    const lanes = new LaneScheduler({ maxConcurrent: 2, onError: (_k, e) => errors.push(e) });
    const order: number[] = [];
    await new Promise<void>((done) => {
      lanes.enqueue('k', async () => { order.push(1); });
      lanes.enqueue('k', async () => { order.push(2); throw new Error('boom'); });
      lanes.enqueue('k', () => { order.push(3); throw new Error('sync boom'); });
      lanes.enqueue('k', async () => { order.push(4); done(); });
    });
    expect(order).toEqual([1, 2, 3, 4]);
    expect(errors).toHaveLength(2);
  });

  it('stop() aborts only the running job; queued ones still run', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    const seen: string[] = [];
    const started = deferred();
    const done = deferred();
    lanes.enqueue('k', (signal) => new Promise<void>((_, reject) => {
      started.resolve();
      signal.addEventListener('abort', () => { seen.push('aborted'); reject(signal.reason); });
    }));
    lanes.enqueue('k', async () => { seen.push('second'); done.resolve(); });
    await started.promise;
    expect(lanes.depth('k')).toBe(1);
    expect(lanes.stop('k')).toBe(true);
    await done.promise;
    expect(seen).toEqual(['aborted', 'second']);
    await lanes.whenIdle();
    expect(lanes.stop('k')).toBe(false);
  });

  it('a busy key does not starve others: lanes are served in the order they became ready', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    const order: string[] = [];
    for (let i = 0; i < 3; i++) lanes.enqueue('busy', async () => { order.push(`busy${i}`); await tick(); });
    lanes.enqueue('other', async () => { order.push('other'); await tick(); });
    lanes.enqueue('last', async () => { order.push('last'); });
    await lanes.whenIdle();
    expect(order).toEqual(['busy0', 'other', 'last', 'busy1', 'busy2']);
  });

  it('pause() starts nothing new and whenIdle() waits for the running job', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 2 });
    const gate = deferred();
    let secondRan = false;
    lanes.enqueue('k', () => gate.promise);
    lanes.enqueue('k', async () => { secondRan = true; });
    lanes.pause();
    const idle = lanes.whenIdle();
    gate.resolve();
    await idle;
    expect(secondRan).toBe(false);
    expect(lanes.depth('k')).toBe(1);
  });
});
