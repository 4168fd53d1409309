import type pg from 'pg';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { ClusterListener } from '../../src/cluster/cluster-listener.ts';
import { runFenced } from '../../src/cluster/fence.ts';
import { PgTranscriptStore, watchTranscriptChanges } from '../../src/cluster/pg-transcript-store.ts';
import { SessionLocks } from '../../src/cluster/session-locks.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { TranscriptMessage } from '../../src/sessions/transcript.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase();
const AT = new Date('2026-12-01T10:00:00.000Z');
const message = (id: string): TranscriptMessage => ({ type: 'message', id, role: 'user', content: id, at: AT.toISOString() });
const ids = (entries: { id?: string }[]) => entries.map((e) => e.id);

/** Counts the statements sent through the pool and through a lane client (heartbeats left out). */
function countStatements(...targets: Pick<pg.Pool, 'query'>[]): { readonly n: number; stop(): void } {
  let n = 0;
  const spies = targets.map((t) => {
    const original = t.query.bind(t) as (...args: unknown[]) => unknown;
    return vi.spyOn(t, 'query').mockImplementation(((...args: unknown[]) => {
      if (args[0] !== 'SELECT 1') n++;
      return original(...args);
    }));
  });
  return { get n() { return n; }, stop: () => { for (const s of spies) s.mockRestore(); } };
}

describePg('transcript read cache across replicas (issue 31: stale history)', () => {
  let a: PgTranscriptStore;
  let b: PgTranscriptStore;
  let locks: SessionLocks;
  let locksB: SessionLocks;
  beforeAll(() => {
    a = new PgTranscriptStore({ pool: db.pool, logger: silentLogger() });
    b = new PgTranscriptStore({ pool: db.pool, logger: silentLogger() });
    locks = new SessionLocks({ uri: db.uri, logger: silentLogger(), leaseMs: 30_000, maxConnections: 2 });
    locksB = new SessionLocks({ uri: db.uri, logger: silentLogger(), leaseMs: 30_000, maxConnections: 2 });
  });
  afterAll(async () => {
    await locks?.close();
    await locksB?.close();
    await a?.close();
    await b?.close();
  });

  it('a replica that cached a transcript reads what another replica appended since (no forget, no notification)', async () => {
    await a.create('s-stale', 'agent:main:telegram:direct:1', AT);
    await a.append('s-stale', message('m1'));
    expect(ids(await a.read('s-stale'))).toEqual(['m1']);
    for (let i = 2; i <= 8; i++) await b.append('s-stale', message(`m${i}`));
    expect(ids(await a.read('s-stale'))).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8']);
    // Reading another session's history from inside a turn (the sessions tool) is a read outside that session's lock.
    const other = (await locks.tryAcquire('agent:main:telegram:direct:other'))!;
    try {
      await b.append('s-stale', message('m9'));
      expect(ids(await runFenced(other.fence, () => a.read('s-stale'))).slice(-1)).toEqual(['m9']);
    } finally {
      await other.release();
    }
  });

  /** Replica B takes the session's lock (waiting for A to give it back), appends, and gives it back. */
  async function appendAsB(key: string, sessionId: string, id: string): Promise<void> {
    const held = await locksB.acquire(key, 10_000);
    if (!held) throw new Error('B could not take the lock');
    try {
      await runFenced(held.fence, () => b.append(sessionId, message(id)));
    } finally {
      await held.release();
    }
  }

  it('under its own hold of the lock a turn reads the cache with no statement; the first read of a new hold costs one', async () => {
    const key = 'agent:main:telegram:direct:2';
    await a.create('s-hold', key, AT);
    await a.append('s-hold', [message('one'), message('two')]);
    let held = (await locks.tryAcquire(key))!;
    try {
      a.forgetKey(key); // what onClaim does when this replica takes the lock afresh
      let counted = countStatements(db.pool, held.fence.client);
      await runFenced(held.fence, async () => {
        expect(ids(await a.read('s-hold'))).toEqual(['one', 'two']);
        expect(counted.n).toBe(1);
        await a.append('s-hold', message('three'));
        expect(counted.n).toBe(2);
        expect(ids(await a.read('s-hold'))).toEqual(['one', 'two', 'three']);
        expect(ids(await a.read('s-hold'))).toEqual(['one', 'two', 'three']);
      });
      expect(counted.n).toBe(2);
      // This replica's own sb_done while it holds the lock changes nothing.
      a.finished(key);
      await runFenced(held.fence, () => a.read('s-hold'));
      expect(counted.n).toBe(2);
      counted.stop();
      await held.release();
      // Another replica runs the session meanwhile; this one takes the lock again (often on the same connection).
      await appendAsB(key, 's-hold', 'four');
      held = (await locks.acquire(key, 10_000))!;
      a.forgetKey(key);
      counted = countStatements(db.pool, held.fence.client);
      expect(ids(await runFenced(held.fence, () => a.read('s-hold')))).toEqual(['one', 'two', 'three', 'four']);
      expect(counted.n).toBe(1);
      counted.stop();
    } finally {
      await held.release();
    }
  });

  it('another replica\'s sb_done makes the next read under a new hold check the database, even without forgetKey', async () => {
    const key = 'agent:main:telegram:direct:3';
    const listener = new ClusterListener({ uri: db.uri, logger: silentLogger() });
    // One connection: the lock is taken again on the connection that vouched for the cache.
    const locks = new SessionLocks({ uri: db.uri, logger: silentLogger(), leaseMs: 30_000, maxConnections: 1 });
    const seen: string[] = [];
    watchTranscriptChanges(a, listener);
    listener.on('sb_done', (payload) => seen.push(payload));
    await listener.start();
    try {
      await a.create('s-done', key, AT);
      let held = (await locks.tryAcquire(key))!;
      const first = held.fence;
      await runFenced(held.fence, async () => {
        await a.append('s-done', message('here'));
        expect(ids(await a.read('s-done'))).toEqual(['here']);
      });
      await held.release();
      await appendAsB(key, 's-done', 'there');
      await db.pool.query('SELECT pg_notify($1, $2)', ['sb_done', JSON.stringify({ key, seq: 2 })]);
      await until(() => seen.length > 0, 'the sb_done notification');
      held = (await locks.acquire(key, 10_000))!;
      expect(held.fence).toBe(first); // the connection that vouched for the cache, in a new hold
      try {
        expect(ids(await runFenced(held.fence, () => a.read('s-done')))).toEqual(['here', 'there']);
      } finally {
        await held.release();
      }
    } finally {
      await listener.close();
      await locks.close();
    }
  });

  it('an append that finds rows its cache lacks drops the cache (a missed hand-over cannot hide them past the next read)', async () => {
    const key = 'agent:main:telegram:direct:4';
    await a.create('s-net', key, AT);
    const held = (await locks.tryAcquire(key))!;
    try {
      await runFenced(held.fence, async () => {
        expect(ids(await a.read('s-net'))).toEqual([]);
        await b.append('s-net', message('elsewhere'));
        await a.append('s-net', message('mine'));
        expect(ids(await a.read('s-net'))).toEqual(['elsewhere', 'mine']);
      });
    } finally {
      await held.release();
    }
  });

  it('an entry committed after a later one (out of n order) and a rolled-back append are caught by the row count', async () => {
    const key = 'agent:main:telegram:direct:5';
    await a.create('s-gap', key, AT);
    await a.append('s-gap', message('first'));
    const held = (await locks.tryAcquire(key))!;
    try {
      // b's turn appends inside its lane transaction (n taken, not committed); a write through the pool commits after it.
      await held.fence.client.query('BEGIN');
      await runFenced(held.fence, () => b.append('s-gap', message('early')));
      await a.append('s-gap', message('late'));
      expect(ids(await a.read('s-gap'))).toEqual(['first', 'late']);
      await held.fence.client.query('COMMIT');
      expect(ids(await a.read('s-gap'))).toEqual(['first', 'early', 'late']);
      // A rolled-back append had reached b's cache: a read outside the lock drops it.
      expect(ids(await b.read('s-gap'))).toEqual(['first', 'early', 'late']);
      await held.fence.client.query('BEGIN');
      await runFenced(held.fence, () => b.append('s-gap', message('rolled back')));
      await held.fence.client.query('ROLLBACK');
      expect(ids(await b.read('s-gap'))).toEqual(['first', 'early', 'late']);
    } finally {
      await held.release();
    }
  });

  it('a transcript archived (reset) on another replica reads empty here, as entries cached with NUL read as stored', async () => {
    await a.create('s-reset', 'agent:main:telegram:direct:6', AT);
    await a.append('s-reset', { ...message('nul'), content: 'a\u0000b' });
    expect((await a.read('s-reset')).map((e) => (e.type === 'message' ? e.content : ''))).toEqual(['a\ufffdb']);
    expect((await b.read('s-reset')).map((e) => (e.type === 'message' ? e.content : ''))).toEqual(['a\ufffdb']);
    await b.archive('s-reset', AT);
    expect(await a.read('s-reset')).toEqual([]);
  });
});
