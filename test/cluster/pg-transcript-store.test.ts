import { afterAll, beforeAll, expect, it } from 'vitest';
import { runFenced } from '../../src/cluster/fence.ts';
import { LeaseLostError } from '../../src/core/errors.ts';
import { PgTranscriptStore, TranscriptNotFoundError } from '../../src/cluster/pg-transcript-store.ts';
import { SessionLocks } from '../../src/cluster/session-locks.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { TranscriptEntry, TranscriptMessage } from '../../src/sessions/transcript.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();
const AT = new Date('2026-11-30T10:00:00.000Z');

const message = (id: string, content = id): TranscriptMessage => ({ type: 'message', id, role: 'user', content, at: AT.toISOString() });

describePg('transcripts on PostgreSQL', () => {
  let store: PgTranscriptStore;
  let locks: SessionLocks;
  beforeAll(() => {
    store = new PgTranscriptStore({ pool: db.pool, logger: silentLogger() });
    locks = new SessionLocks({ uri: db.uri, logger: silentLogger(), leaseMs: 30_000, maxConnections: 2 });
  });
  afterAll(async () => {
    await locks?.close();
    await store?.close();
  });

  it('keeps entries in call order under concurrent appends, and another replica reads the same', async () => {
    await store.create('s-order', 'agent:main:telegram:direct:1', AT);
    await store.create('s-order', 'agent:main:telegram:direct:1', AT); // idempotent
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 40; i++) {
      writes.push(i % 4 === 0 ? store.append('s-order', [message(`m${i}a`), message(`m${i}b`)]) : store.append('s-order', message(`m${i}`)));
    }
    const readMidway = store.read('s-order');
    await Promise.all(writes);
    const expected = Array.from({ length: 40 }, (_, i) => (i % 4 === 0 ? [`m${i}a`, `m${i}b`] : [`m${i}`])).flat();
    expect((await readMidway).map((e) => e.id)).toEqual(expected);
    expect((await store.read('s-order')).map((e) => e.id)).toEqual(expected);
    const other = new PgTranscriptStore({ pool: db.pool, logger: silentLogger() });
    expect((await other.read('s-order')).map((e) => e.id)).toEqual(expected);
    // Two replicas appending to two sessions at once keep each session's own order.
    await other.create('s-b', 'agent:main:telegram:direct:2', AT);
    await Promise.all(Array.from({ length: 20 }, (_, i) => [other.append('s-b', message(`b${i}`)), store.append('s-order', message(`x${i}`))]).flat());
    expect((await store.read('s-b')).map((e) => e.id)).toEqual(Array.from({ length: 20 }, (_, i) => `b${i}`));
    other.forget('s-order'); // its cache predates the other replica's appends
    expect((await other.read('s-order')).map((e) => e.id).slice(-20)).toEqual(Array.from({ length: 20 }, (_, i) => `x${i}`));
  });

  it('a cached transcript never hides what another replica appended (issue 31), with or without forget()', async () => {
    await store.create('s-cache', 'agent:main:telegram:direct:3', AT);
    await store.append('s-cache', message('first'));
    expect((await store.read('s-cache')).map((e) => e.id)).toEqual(['first']);
    const other = new PgTranscriptStore({ pool: db.pool, logger: silentLogger() });
    await other.append('s-cache', message('elsewhere'));
    expect((await store.read('s-cache')).map((e) => e.id)).toEqual(['first', 'elsewhere']);
    await other.append('s-cache', message('again'));
    store.forget('s-cache');
    expect((await store.read('s-cache')).map((e) => e.id)).toEqual(['first', 'elsewhere', 'again']);
  });

  it('stores any text (NUL and unpaired surrogates, which jsonb refuses, become U+FFFD; a literal backslash-u0000 stays) and exports SPEC §4 JSONL', async () => {
    await store.create('s-text', 'agent:ops:slack:channel:c1', AT);
    const tool: TranscriptEntry = { type: 'message', id: 't', role: 'assistant', content: '', toolCalls: [{ id: 'c', name: 'memory_write', arguments: '{"a":1}' }], at: AT.toISOString() };
    await store.append('s-text', [message('nul', 'a\u0000b'), message('lit', 'a\\u0000b'), tool, message('half', 'x\ud83dy \ud83d\ude00')]);
    store.forget('s-text');
    const read = await store.read('s-text');
    expect(read.map((e) => (e.type === 'message' ? e.content : ''))).toEqual(['a\ufffdb', 'a\\u0000b', '', 'x\ufffdy \ud83d\ude00']);
    expect(read[2]).toEqual(tool);
    const lines = (await store.exportJsonl('s-text'))!.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[0]).toEqual({ type: 'session', version: 1, sessionId: 's-text', key: 'agent:ops:slack:channel:c1', createdAt: AT.toISOString() });
    expect(lines.slice(1).map((l) => l.id)).toEqual(['nul', 'lit', 't', 'half']);
    expect((await db.pool.query('SELECT agent_id FROM sb_transcript WHERE session_id = $1', ['s-text'])).rows[0].agent_id).toBe('ops');
  });

  it('archives (read no more), prunes archives past the retention only, and refuses appends to an unknown transcript', async () => {
    await store.create('s-old', 'agent:main:telegram:direct:4', AT);
    await store.append('s-old', message('kept'));
    expect(await store.archive('s-old', AT)).toBe('postgres:sb_transcript/s-old.jsonl.reset.2026-11-30T10-00-00-000Z');
    expect(await store.archive('s-old', AT)).toBeUndefined();
    expect(await store.read('s-old')).toEqual([]);
    expect(await store.exportJsonl('s-old')).toContain('"kept"');
    await store.create('s-new', 'agent:main:telegram:direct:4', AT);
    await store.archive('s-new', new Date(AT.getTime() + 86_400_000));
    expect(await store.pruneArchives(new Date(AT.getTime() + 1.5 * 86_400_000), 86_400_000)).toBe(1);
    expect(await store.exportJsonl('s-old')).toBeUndefined();
    expect(await store.exportJsonl('s-new')).toBeDefined();
    await expect(store.append('s-missing', message('x'))).rejects.toBeInstanceOf(TranscriptNotFoundError);
    expect(await store.read('s-missing')).toEqual([]);
  });

  it('appends through the lane connection while the lock is held; after the connection is killed they fail with LeaseLostError', async () => {
    const key = 'agent:main:telegram:direct:fenced';
    await store.create('s-fenced', key, AT);
    const held = (await locks.tryAcquire(key))!;
    try {
      await runFenced(held.fence, async () => {
        await held.fence.client.query('BEGIN');
        await store.append('s-fenced', message('rolled back'));
        await held.fence.client.query('ROLLBACK');
        await store.append('s-fenced', message('owner'));
      });
      const pid = (await held.fence.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      await expect(runFenced(held.fence, () => store.append('s-fenced', message('zombie')))).rejects.toBeInstanceOf(LeaseLostError);
    } finally {
      await held.release();
    }
    store.forget('s-fenced');
    expect((await store.read('s-fenced')).map((e) => e.id)).toEqual(['owner']);
  });
});
