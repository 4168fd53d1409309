import { afterEach, expect, it } from 'vitest';
import { fencedClient, runFenced } from '../../src/cluster/fence.ts';
import { LeaseLostError } from '../../src/core/errors.ts';
import { SessionLocks } from '../../src/cluster/session-locks.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();

describePg('session locks on PostgreSQL', () => {
  const opened: SessionLocks[] = [];
  const locks = (leaseMs = 30_000, onLost?: (key: string) => void) => {
    const l = new SessionLocks({ uri: db.uri, logger: silentLogger(), leaseMs, maxConnections: 4, onLost });
    opened.push(l);
    return l;
  };
  afterEach(async () => { for (const l of opened.splice(0)) await l.close(); });

  it('one replica at a time: the other gets nothing until the holder releases; holds of one replica share the lock', async () => {
    const a = locks();
    const b = locks();
    const first = await a.tryAcquire('agent:main:telegram:direct:1');
    expect(first?.fresh).toBe(true);
    expect(await b.tryAcquire('agent:main:telegram:direct:1')).toBeUndefined();
    const second = await a.tryAcquire('agent:main:telegram:direct:1');
    expect(second?.fresh).toBe(false);
    await first!.release();
    expect(await b.tryAcquire('agent:main:telegram:direct:1')).toBeUndefined();
    await second!.release();
    const taken = await b.tryAcquire('agent:main:telegram:direct:1');
    expect(taken?.fresh).toBe(true);
    // Another key is independent.
    expect(await a.tryAcquire('agent:main:telegram:direct:2')).toBeDefined();
  });

  it('a waiting acquire gets the lock when the holder gives it back, and gives up after its wait', async () => {
    const a = locks();
    const b = locks();
    const held = await a.tryAcquire('k');
    expect(await b.acquire('k', 300)).toBeUndefined();
    const waiting = b.acquire('k', 10_000);
    await held!.release();
    expect((await waiting)?.fresh).toBe(true);
  });

  it('a last statement that gives the lock back itself: a hold taken meanwhile waits for it and takes the lock afresh; the old holds end without giving their connection back twice', async () => {
    const a = locks();
    const b = locks();
    // The claim's hold and its lane task's, as the work queue has them when it marks the message done.
    const claim = await a.tryAcquire('k');
    const task = await a.tryAcquire('k');
    const settle = a.beginGiveBack('k');
    expect(settle).toBeDefined();
    expect(a.beginGiveBack('k')).toBeUndefined(); // one last statement at a time
    let meanwhile: Awaited<ReturnType<SessionLocks['tryAcquire']>> | 'waiting' = 'waiting';
    const waiting = a.tryAcquire('k').then((h) => { meanwhile = h; return h; });
    const { rows } = await claim!.fence.client.query<{ unlocked: boolean }>("SELECT pg_advisory_unlock(hashtextextended('k', 0)) AS unlocked");
    await new Promise((r) => setTimeout(r, 20));
    expect(meanwhile).toBe('waiting');
    settle!(rows[0]!.unlocked);
    const again = await waiting;
    expect(again?.fresh).toBe(true);
    expect(again!.fence).not.toBe(claim!.fence);
    expect(await b.tryAcquire('k')).toBeUndefined();
    await task!.release();
    await claim!.release();
    await again!.release();
    // Three keys held at once get three connections (a connection given back twice would serve two of them).
    const held = await Promise.all(['x', 'y', 'z'].map((key) => a.tryAcquire(key)));
    expect(new Set(held.map((h) => h!.fence)).size).toBe(3);
  });

  it('a frozen holder (no heartbeat past the lease) loses the lock to another replica, and its writes through the lock fail', async () => {
    const lost: string[] = [];
    const a = locks(1000, (key) => lost.push(key));
    const b = locks();
    const held = await a.tryAcquire('frozen');
    // Freeze this process (as SIGSTOP would) for longer than the lease: PostgreSQL ends the idle connection.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2500);
    let taken;
    for (let i = 0; i < 100 && !taken; i++) {
      taken = await b.tryAcquire('frozen');
      if (!taken) await new Promise((r) => setTimeout(r, 20));
    }
    expect(taken?.fresh).toBe(true);
    const write = runFenced(held!.fence, async () => {
      await fencedClient('frozen')!.query('SELECT 1');
    });
    await expect(write).rejects.toBeInstanceOf(Error);
    for (let i = 0; i < 100 && !lost.length; i++) await new Promise((r) => setTimeout(r, 20));
    expect(lost).toEqual(['frozen']);
    expect(a.isHeld('frozen')).toBe(false);
    await expect(runFenced(held!.fence, async () => fencedClient('frozen'))).rejects.toBeInstanceOf(LeaseLostError);
  }, 20_000);
});
