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

  it('isRunning, depth and totalQueued say what runs and what waits', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    const gate = deferred();
    expect([lanes.isRunning('a'), lanes.depth('a'), lanes.totalQueued()]).toEqual([false, 0, 0]);
    lanes.enqueue('a', () => gate.promise);
    lanes.enqueue('a', async () => undefined);
    lanes.enqueue('b', async () => undefined);
    lanes.enqueue('b', async () => undefined);
    expect([lanes.isRunning('a'), lanes.isRunning('b')]).toEqual([true, false]);
    expect([lanes.depth('a'), lanes.depth('b'), lanes.depth('c'), lanes.totalQueued()]).toEqual([1, 2, 0, 3]);
    gate.resolve();
    await lanes.whenIdle();
    expect([lanes.isRunning('a'), lanes.totalQueued(), lanes.runningCount]).toEqual([false, 0, 0]);
  });

  it('stop() gives the running job its reason; a second stop of the same job is refused', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    const reasons: string[] = [];
    const started = deferred();
    lanes.enqueue('k', (signal) => new Promise<void>((resolve) => {
      started.resolve();
      signal.addEventListener('abort', () => { reasons.push((signal.reason as Error).message); resolve(); });
    }));
    await started.promise;
    expect(lanes.stop('nobody')).toBe(false);
    expect(lanes.stop('k')).toBe(true);
    expect(lanes.stop('k', 'again')).toBe(false);
    await lanes.whenIdle();
    expect(reasons).toEqual(['stopped']);
  });

  it('abortAll() aborts every running job with the reason; queued jobs stay queued', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 2 });
    const reasons: string[] = [];
    const job = (signal: AbortSignal) => new Promise<void>((resolve) => signal.addEventListener('abort', () => { reasons.push((signal.reason as Error).message); resolve(); }));
    lanes.enqueue('a', job);
    lanes.enqueue('b', job);
    lanes.pause();
    lanes.enqueue('a', async () => undefined);
    lanes.abortAll('shutting down');
    await lanes.whenIdle();
    expect(reasons).toEqual(['shutting down', 'shutting down']);
    expect(lanes.depth('a')).toBe(1);
  });

  it('cancelQueued() drops every waiting job, calling its cancel, and leaves the running one alone', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    const gate = deferred();
    const cancelled: string[] = [];
    let ran = 0;
    lanes.enqueue('a', () => gate.promise);
    lanes.enqueue('a', async () => { ran++; }, () => cancelled.push('a2'));
    lanes.enqueue('b', async () => { ran++; }, () => cancelled.push('b1'));
    lanes.enqueue('b', async () => { ran++; });
    expect(lanes.cancelQueued()).toBe(3);
    expect(cancelled).toEqual(['a2', 'b1']);
    expect([lanes.isRunning('a'), lanes.totalQueued()]).toEqual([true, 0]);
    gate.resolve();
    await lanes.whenIdle();
    expect(ran).toBe(0);
    // The scheduler goes on working afterwards, also for the lanes it dropped.
    await new Promise<void>((done) => lanes.enqueue('b', async () => { ran++; done(); }));
    expect(ran).toBe(1);
  });

  it('whenIdle() resolves at once when nothing runs, and waits for queued work otherwise', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    let resolved = false;
    await lanes.whenIdle();
    const gate = deferred();
    lanes.enqueue('a', () => gate.promise);
    lanes.enqueue('b', async () => undefined);
    const idle = lanes.whenIdle().then(() => { resolved = true; });
    await tick();
    expect(resolved).toBe(false);
    gate.resolve();
    await idle;
    expect(lanes.totalQueued()).toBe(0);
  });

  it('lend() hands the slot to another lane while the job waits, and takes it back before lanes merely ready', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    const order: string[] = [];
    const childGate = deferred();
    const running: number[] = [];
    const parentDone = new Promise<void>((done) => {
      lanes.enqueue('parent', async () => {
        order.push('parent start');
        // With one slot, the parent's work starts another lane's job: without lending it could not run.
        const value = await lanes.lend(async () => {
          running.push(lanes.runningCount);
          lanes.enqueue('child', async () => { order.push('child start'); await childGate.promise; order.push('child end'); });
          lanes.enqueue('other', async () => { order.push('other'); });
          return 'lent';
        });
        order.push(`parent end (${value})`);
        running.push(lanes.runningCount);
        done();
      });
    });
    await tick();
    expect(order).toEqual(['parent start', 'child start']);
    childGate.resolve();
    await parentDone;
    await lanes.whenIdle();
    expect(order).toEqual(['parent start', 'child start', 'child end', 'parent end (lent)', 'other']);
    expect(running).toEqual([0, 1]);
  });

  it('abortAll() at shutdown also passes lanes that only wait for a slot: the running job is aborted, the waiting one stays', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    const reasons: string[] = [];
    lanes.enqueue('a', (signal) => new Promise<void>((resolve) => signal.addEventListener('abort', () => { reasons.push((signal.reason as Error).message); resolve(); })));
    lanes.enqueue('b', async () => undefined);
    lanes.pause();
    expect(() => lanes.abortAll('shutting down')).not.toThrow();
    await lanes.whenIdle();
    expect(reasons).toEqual(['shutting down']);
    expect([lanes.isRunning('b'), lanes.depth('b')]).toEqual([false, 1]);
  });

  it('whenIdle() waits for a job that lent its slot (it is still working, e.g. waiting on a sub-agent)', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    const waiting = deferred();
    const lent = deferred();
    let idle = false;
    lanes.enqueue('parent', async () => {
      await lanes.lend(async () => { lent.resolve(); await waiting.promise; });
    });
    await lent.promise;
    expect(lanes.runningCount).toBe(0);
    const whenIdle = lanes.whenIdle().then(() => { idle = true; });
    await tick();
    expect(idle).toBe(false);
    waiting.resolve();
    await whenIdle;
    expect(lanes.isRunning('parent')).toBe(false);
  });

  it('a job enqueued on a lane that is already waiting is not served twice', async () => {
    const lanes = new LaneScheduler({ maxConcurrent: 1 });
    const gate = deferred();
    const order: string[] = [];
    lanes.enqueue('a', () => gate.promise);
    lanes.enqueue('b', async () => { order.push('b1'); });
    lanes.enqueue('b', async () => { order.push('b2'); });
    lanes.enqueue('c', async () => { order.push('c1'); });
    gate.resolve();
    await lanes.whenIdle();
    expect(order).toEqual(['b1', 'c1', 'b2']);
  });
});

