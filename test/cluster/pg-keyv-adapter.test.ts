import KeyvPostgres from '@keyv/postgres';
import Keyv from 'keyv';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runFenced } from '../../src/cluster/fence.ts';
import { LeaseLostError } from '../../src/core/errors.ts';
import { SessionLocks } from '../../src/cluster/session-locks.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { SessionEntry } from '../../src/sessions/entry.ts';
import type { KeyvSessionStore } from '../../src/sessions/store.ts';
import { openSessionStore } from '../../src/stores.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();

const entry = (key: string, overrides: Partial<SessionEntry> = {}): SessionEntry => ({
  key, sessionId: '5f0c6a52-1d7e-4d0b-9a51-3c2b8f7e6d10', agentId: 'main', channel: 'telegram', accountId: 'default', chatType: 'direct',
  peerId: '42', displayName: 'Ada', createdAt: 1, updatedAt: 2, sessionStartedAt: 1, state: 'active', runState: 'idle', overrides: {},
  tokens: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 }, contextTokens: 0, compactionCount: 0, messageCount: 3, ...overrides,
});

describePg('session entries on PostgreSQL (keyv table, fenced writes)', () => {
  let store: KeyvSessionStore;
  let locks: SessionLocks;
  beforeAll(async () => {
    store = await openSessionStore(db.uri, { pool: db.pool });
    locks = new SessionLocks({ uri: db.uri, logger: silentLogger(), leaseMs: 30_000, maxConnections: 4 });
  });
  afterAll(async () => {
    await locks?.close();
    await store?.close();
  });

  it('@keyv/postgres reads what the store wrote, and the store reads what @keyv/postgres wrote (contract)', async () => {
    const written = entry('agent:main:telegram:direct:1', { displayName: ':colon "quoted" ünï' });
    await store.set(written);
    const keyv = new Keyv({ store: new KeyvPostgres({ uri: db.uri, keySize: 1024 }), namespace: 'sessions' });
    try {
      expect(await keyv.get('agent:main:telegram:direct:1')).toEqual(written);
      const theirs = entry('agent:main:telegram:direct:2', { displayName: ':base64:aGk=' });
      expect(await keyv.set('agent:main:telegram:direct:2', theirs)).toBe(true);
      expect(await store.get('agent:main:telegram:direct:2')).toEqual(theirs);
      const { rows } = await db.pool.query<{ key: string }>("SELECT key FROM keyv WHERE key LIKE 'sessions:%' ORDER BY key");
      expect(rows.map((r) => r.key)).toEqual(['sessions:agent:main:telegram:direct:1', 'sessions:agent:main:telegram:direct:2']);
    } finally {
      await keyv.disconnect();
    }
    expect(await store.delete('agent:main:telegram:direct:2')).toBe(true);
    expect(await store.delete('agent:main:telegram:direct:2')).toBe(false);
    expect(await store.get('agent:main:telegram:direct:2')).toBeUndefined();
  });

  it('lists in key order (binary), pages by cursor, filters by channel and agent, counts only its namespace', async () => {
    await db.pool.query("DELETE FROM keyv WHERE key LIKE 'sessions:%'");
    await db.pool.query(`INSERT INTO keyv VALUES ('pairing:peer:x', '{"value":{}}'), ('sessionsX', '{"value":{}}')`);
    const keys = ['agent:main:b', 'agent:main:A', 'agent:main:a', 'agent:main:_', 'agent:ops:c', 'agent:main:slack:1'];
    for (const key of keys) {
      await store.set(entry(key, { channel: key.includes('slack') ? 'slack' : 'telegram', agentId: key.startsWith('agent:ops') ? 'ops' : 'main' }));
    }
    expect(await store.count()).toBe(6);
    const sorted = [...keys].sort();
    const first = await store.list({ limit: 4 });
    expect(first.entries.map((e) => e.key)).toEqual(sorted.slice(0, 4));
    expect(first.nextCursor).toBe(sorted[3]);
    const second = await store.list({ limit: 4, cursor: first.nextCursor });
    expect(second.entries.map((e) => e.key)).toEqual(sorted.slice(4));
    expect(second.nextCursor).toBeUndefined();
    expect((await store.list({ channel: 'slack' })).entries.map((e) => e.key)).toEqual(['agent:main:slack:1']);
    expect((await store.list({ agentId: 'ops' })).entries.map((e) => e.key)).toEqual(['agent:ops:c']);
    const telegram = await store.list({ channel: 'telegram', limit: 2 });
    expect(telegram.entries.map((e) => e.key)).toEqual(sorted.filter((k) => !k.includes('slack')).slice(0, 2));
  });

  it('writes through the lane connection while the lock is held: a rolled-back lane transaction leaves no row', async () => {
    const key = 'agent:main:telegram:direct:fenced';
    const held = (await locks.tryAcquire(key))!;
    try {
      await runFenced(held.fence, async () => {
        await held.fence.client.query('BEGIN');
        await store.set(entry(key));
        // Inside the lane's transaction the store reads its own write; the pool does not see it yet.
        expect((await store.get(key))?.key).toBe(key);
        expect((await db.pool.query('SELECT 1 FROM keyv WHERE key = $1', [`sessions:${key}`])).rowCount).toBe(0);
        await held.fence.client.query('ROLLBACK');
      });
      expect(await store.get(key)).toBeUndefined();
      // Another session's write under this fence is not fenced: it goes through the pool.
      await runFenced(held.fence, async () => {
        await held.fence.client.query('BEGIN');
        await store.set(entry('agent:main:telegram:direct:other'));
        await held.fence.client.query('ROLLBACK');
      });
      expect(await store.get('agent:main:telegram:direct:other')).toBeDefined();
    } finally {
      await held.release();
    }
  });

  it('a fenced write after the lane connection was killed fails with LeaseLostError and writes nothing', async () => {
    const key = 'agent:main:telegram:direct:lost';
    await store.set(entry(key, { displayName: 'before' }));
    const held = (await locks.tryAcquire(key))!;
    try {
      const pid = (await held.fence.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await runFenced(held.fence, () => store.set(entry(key, { displayName: 'owner' })));
      // With a timeout, pg_terminate_backend returns once the backend has exited (and released its locks).
      await db.pool.query('SELECT pg_terminate_backend($1, 5000)', [pid]);
      // The lock is free again: another replica may take the session at once.
      const other = await db.pool.connect();
      try {
        expect((await other.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [key])).rows[0]!.ok).toBe(true);
        await other.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]);
      } finally {
        other.release();
      }
      const write = runFenced(held.fence, () => store.set(entry(key, { displayName: 'zombie' })));
      await expect(write).rejects.toBeInstanceOf(LeaseLostError);
      await expect(runFenced(held.fence, () => store.set(entry(key, { displayName: 'zombie again' })))).rejects.toMatchObject({ code: 'LEASE_LOST' });
    } finally {
      await held.release();
    }
    expect((await store.get(key))?.displayName).toBe('owner');
  });
});
