import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { SessionEntry } from '../../src/sessions/entry.ts';
import { SessionManager, type SessionInit } from '../../src/sessions/manager.ts';
import type { ListSessionsOptions, SessionPage, SessionStore } from '../../src/sessions/store.ts';
import { KeyvSessionStore } from '../../src/sessions/store.ts';
import { JsonlTranscriptStore } from '../../src/sessions/transcript.ts';
import path from 'node:path';
import { tempDir } from '../helpers/gateway.ts';

/** An in-memory store whose reads take a turn of the event loop (like a real async store) and that can be told to fail. */
class MemoryStore implements SessionStore {
  readonly data = new Map<string, SessionEntry>();
  failNextWrites = 0;
  writes = 0;
  async get(key: string) { await new Promise((r) => setImmediate(r)); const e = this.data.get(key); return e && structuredClone(e); }
  async set(entry: SessionEntry) {
    if (this.failNextWrites > 0) { this.failNextWrites--; throw new Error('disk full'); }
    this.writes++;
    this.data.set(entry.key, structuredClone(entry));
  }
  async delete(key: string) { return this.data.delete(key); }
  async list(_o?: ListSessionsOptions): Promise<SessionPage> { return { entries: [...this.data.values()] }; }
  async count() { return this.data.size; }
  async close() {}
}

const init = (i: number | string): SessionInit => ({ key: `agent:main:direct:${i}`, agentId: 'main', channel: 'telegram', accountId: 'default', chatType: 'direct', peerId: String(i) });

const transcriptDirs: (() => void)[] = [];
afterAll(() => { for (const remove of transcriptDirs) remove(); });

function manager(store: SessionStore, clock: ManualClock, max: number, expires: (e: SessionEntry) => number = () => Infinity) {
  const tmp = tempDir();
  transcriptDirs.push(tmp.remove);
  const transcripts = new JsonlTranscriptStore({ dir: tmp.dir, logger: silentLogger() });
  return new SessionManager({ store, transcripts, clock, logger: silentLogger(), maxActiveSessions: max, expiresAt: expires, retry: { retries: 3, minTimeout: 1, maxTimeout: 2 } });
}

describe('SessionManager', () => {
  let clock: ManualClock;
  beforeEach(() => { clock = new ManualClock('2026-03-10T12:00:00Z'); });

  it('never holds more than maxActiveSessions, even with 1000 concurrent admissions', async () => {
    const store = new MemoryStore();
    const m = manager(store, clock, 50);
    let peak = 0;
    const sampler = setInterval(() => { peak = Math.max(peak, m.size); }, 0);
    const sessions = await Promise.all(Array.from({ length: 1000 }, async (_, i) => {
      const s = await m.admit(init(i));
      peak = Math.max(peak, m.size);
      return s;
    }));
    clearInterval(sampler);
    expect(new Set(sessions.map((s) => s.key)).size).toBe(1000);
    expect(peak).toBeLessThanOrEqual(50);
    expect(m.size).toBe(50);
    expect(m.evictionCount).toBe(950);
  });

  it('stays within the cap when every admission also holds its session for a while', async () => {
    const m = manager(new MemoryStore(), clock, 10);
    let peak = 0;
    await Promise.all(Array.from({ length: 200 }, async (_, i) => {
      const s = await m.acquire(init(i % 60));
      peak = Math.max(peak, m.size);
      await new Promise((r) => setImmediate(r));
      m.release(s);
    }));
    expect(peak).toBeLessThanOrEqual(10);
  });

  it('loads one key once even when many admissions race for it', async () => {
    const store = new MemoryStore();
    let reads = 0;
    const get = store.get.bind(store);
    store.get = async (key) => { reads++; return get(key); };
    const m = manager(store, clock, 10);
    const all = await Promise.all(Array.from({ length: 100 }, () => m.admit(init('same'))));
    expect(new Set(all).size).toBe(1);
    expect(reads).toBe(1);
  });

  it('evicts an expired session before the least recently active one', async () => {
    const expired = new Set(['agent:main:direct:1']);
    const m = manager(new MemoryStore(), clock, 3, (e) => (expired.has(e.key) ? 0 : Infinity));
    for (const i of [0, 1, 2]) await m.admit(init(i));
    await m.admit(init(3));
    expect(m.peek('agent:main:direct:0')).toBeDefined(); // the least recent, but not expired
    expect(m.peek('agent:main:direct:1')).toBeUndefined();
    await m.admit(init(4));
    expect(m.peek('agent:main:direct:0')).toBeUndefined(); // no expired one left: LRU goes
  });

  it('never evicts a held session', async () => {
    const m = manager(new MemoryStore(), clock, 2);
    const held = await m.acquire(init('held'));
    await m.admit(init('a'));
    await m.admit(init('b'));
    await m.admit(init('c'));
    expect(m.peek(held.key)).toBe(held);
    m.release(held);
  });

  it('eviction leaves memory only: the next admission gets the stored entry back', async () => {
    const store = new MemoryStore();
    const m = manager(store, clock, 1);
    const s = await m.acquire(init('x'));
    s.entry.messageCount = 7;
    await m.save(s.entry);
    m.release(s);
    await m.admit(init('y'));
    expect(m.peek('agent:main:direct:x')).toBeUndefined();
    expect(store.data.has('agent:main:direct:x')).toBe(true);
    const back = await m.admit(init('x'));
    expect(back.entry.sessionId).toBe(s.entry.sessionId);
    expect(back.entry.messageCount).toBe(7);
  });

  it('retries a failed write with backoff and keeps writes of one key in order', async () => {
    const store = new MemoryStore();
    const m = manager(store, clock, 10);
    const s = await m.admit(init('w'));
    store.failNextWrites = 2;
    s.entry.messageCount = 1;
    const first = m.save(s.entry);
    s.entry.messageCount = 2;
    const second = m.save(s.entry);
    await Promise.all([first, second]);
    expect(store.data.get(s.key)?.messageCount).toBe(2);
  });

  it('a burst of saves before the write starts is written once, with the newest state', async () => {
    const store = new MemoryStore();
    const m = manager(store, clock, 10);
    const s = await m.admit(init('burst'));
    const before = store.writes;
    const saves: Promise<void>[] = [];
    for (let i = 1; i <= 20; i++) {
      s.entry.messageCount = i;
      saves.push(m.save(s.entry));
    }
    await Promise.all(saves);
    expect(store.writes - before).toBe(1);
    expect(store.data.get(s.key)?.messageCount).toBe(20);
    // Each save's promise settles only once a write holding its state (or a newer one) is stored.
    s.entry.messageCount = 21;
    await m.save(s.entry);
    expect(store.data.get(s.key)?.messageCount).toBe(21);
  });

  it('a write that fails every retry is written again by flush()', async () => {
    const store = new MemoryStore();
    const m = manager(store, clock, 10);
    const s = await m.admit(init('z'));
    store.failNextWrites = 4;
    await expect(m.save(s.entry)).rejects.toThrow(/disk full/);
    expect(m.unsavedCount).toBe(1);
    await m.flush();
    expect(m.unsavedCount).toBe(0);
    expect(store.data.get(s.key)?.sessionId).toBe(s.entry.sessionId);
  });

  it('a write refused because the session lock was lost (cluster mode) is neither retried nor written at flush()', async () => {
    const store = new MemoryStore();
    const m = manager(store, clock, 10);
    const s = await m.admit(init('lost'));
    const before = store.writes;
    let attempts = 0;
    store.set = async () => { attempts++; throw Object.assign(new Error('lock lost'), { code: 'LEASE_LOST' }); };
    await expect(m.save(s.entry)).rejects.toThrow(/lock lost/);
    expect(attempts).toBe(1);
    expect(m.unsavedCount).toBe(0);
    await m.flush();
    expect(store.writes).toBe(before);
  });
});

describe('KeyvSessionStore (SQLite)', () => {
  let tmp: ReturnType<typeof tempDir>;
  afterEach(() => tmp.remove());

  it('stores entries in WAL mode, pages by key with a channel filter, and counts', async () => {
    tmp = tempDir();
    const uri = `sqlite://${path.join(tmp.dir, 'sessions.sqlite')}`;
    const store = await KeyvSessionStore.open(uri);
    const clock = new ManualClock();
    const m = manager(store, clock, 100);
    for (let i = 0; i < 25; i++) {
      const s = await m.admit({ ...init(String(i).padStart(2, '0')), channel: i % 2 ? 'slack' : 'telegram' });
      await m.save(s.entry);
    }
    expect(await store.count()).toBe(25);
    const first = await store.list({ limit: 10 });
    expect(first.entries).toHaveLength(10);
    expect(first.entries[0]?.key).toBe('agent:main:direct:00');
    const second = await store.list({ limit: 10, cursor: first.nextCursor });
    expect(second.entries[0]?.key).toBe('agent:main:direct:10');
    const third = await store.list({ limit: 10, cursor: second.nextCursor });
    expect(third.entries).toHaveLength(5);
    expect(third.nextCursor).toBeUndefined();
    const slack = await store.list({ channel: 'slack', limit: 100 });
    expect(slack.entries.map((e) => e.channel)).toEqual(Array(12).fill('slack'));
    await store.close();
    // A second process can read while the first has the file open (WAL).
    const reopened = await KeyvSessionStore.open(uri);
    expect((await reopened.get('agent:main:direct:03'))?.channel).toBe('slack');
    await reopened.close();
  });
});
