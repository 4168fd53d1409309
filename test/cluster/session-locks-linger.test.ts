// Issue 31 (statements per turn): a session lock lingers with its idle lane connection after its last hold, so
// the same session taken again costs no statement, and its unlock rides on the connection's next lock statement.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { SessionLocks } from '../../src/cluster/session-locks.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { StatementCounter } from '../../bench/cluster/statement-counter.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase();

describePg('session locks that linger', () => {
  let counter: StatementCounter;
  beforeAll(async () => { counter = await StatementCounter.start(db.uri); });
  afterAll(async () => { await counter.close(); });
  const opened: SessionLocks[] = [];
  const locks = (options: { lingerMs?: number; maxConnections?: number } = {}) => {
    const l = new SessionLocks({ uri: counter.uri(db.uri), logger: silentLogger(), leaseMs: 30_000, maxConnections: options.maxConnections ?? 4, lingerMs: options.lingerMs ?? 600_000 });
    opened.push(l);
    return l;
  };
  afterEach(async () => { for (const l of opened.splice(0)) await l.close(); });

  it('a released lock stays with this replica: taken again here without a statement, refused to another replica', async () => {
    const a = locks();
    const b = locks();
    const first = await a.tryAcquire('s1');
    await first!.release();
    counter.reset();
    const again = await a.tryAcquire('s1');
    expect(again?.fresh).toBe(true);
    expect(counter.tally().total).toBe(0);
    await again!.release();
    expect(await b.tryAcquire('s1')).toBeUndefined();
    expect(a.lingeringPids()).toHaveLength(1);
  });

  it('another session on the lingering connection: one statement gives the old lock back and takes the new one', async () => {
    const a = locks({ maxConnections: 1 });
    const b = locks();
    await (await a.tryAcquire('s1'))!.release();
    counter.reset();
    const other = await a.tryAcquire('s2');
    expect(other?.fresh).toBe(true);
    expect(counter.tally().total).toBe(1);
    expect((await b.tryAcquire('s1'))?.fresh).toBe(true);
    await other!.release();
  });

  it('a lingering lock is given back after lingerMs', async () => {
    const a = locks({ lingerMs: 100 });
    const b = locks();
    await (await a.tryAcquire('s1'))!.release();
    await until(async () => (await b.tryAcquire('s1'))?.fresh, 'the lock to be given back', 2000);
    expect(a.lingeringPids()).toEqual([]);
  });
});
