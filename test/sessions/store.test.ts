import path from 'node:path';
import { defaultDeserialize, defaultSerialize } from '@keyv/serialize';
import KeyvSqlite from '@keyv/sqlite';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import Keyv from 'keyv';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { SessionEntry } from '../../src/sessions/entry.ts';
import { deserializeKeyv, serializeKeyv } from '../../src/sessions/keyv-codec.ts';
import { SessionManager } from '../../src/sessions/manager.ts';
import { KeyvSessionStore } from '../../src/sessions/store.ts';
import { JsonlTranscriptStore } from '../../src/sessions/transcript.ts';
import { tempDir } from '../helpers/gateway.ts';

const entry = (key: string, displayName = 'Ada'): SessionEntry => ({
  key, sessionId: '5f0c6a52-1d7e-4d0b-9a51-3c2b8f7e6d10', agentId: 'main', channel: 'telegram', accountId: 'default', chatType: 'direct',
  peerId: '42', displayName, createdAt: 1, updatedAt: 2, sessionStartedAt: 1, state: 'active', runState: 'idle', overrides: {},
  tokens: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 }, contextTokens: 0, compactionCount: 0, messageCount: 3,
});

/** Strings keyv treats specially: a leading `:`, `:base64:`, quotes and separators that look like JSON. */
const tricky = fc.oneof(fc.string(), fc.constantFrom(':', '::', ':)', ':base64:aGk=', '",":x', '[":', 'a,":b', '\\":', ' ":'));
const jsonish = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, tricky, fc.integer(), fc.double({ noNaN: true }), fc.boolean(), fc.constant(null), tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(tricky, tie('value'), { maxKeys: 4 }),
})).value;

describe('keyv codec', () => {
  it('writes the bytes keyv writes and reads back what keyv reads, for any JSON value', () => {
    fc.assert(fc.property(jsonish, (value) => {
      const text = serializeKeyv({ value });
      expect(text).toBe(defaultSerialize({ value }));
      expect(deserializeKeyv(text)).toEqual(defaultDeserialize(text));
    }), { numRuns: 2000 });
    const buffer = { value: { nested: [Buffer.from('hi')] } };
    expect(serializeKeyv(buffer)).toBe(defaultSerialize(buffer));
    // Text another writer formatted with whitespace is read as keyv reads it.
    expect(deserializeKeyv('{"value": {"name": ":)", "list": [ "::x"]}}')).toEqual({ value: { name: ')', list: [':x'] } });
  });
});

describe('KeyvSessionStore on SQLite', () => {
  let tmp: ReturnType<typeof tempDir>;
  afterEach(() => tmp.remove());

  it('keeps @keyv/sqlite\'s table: what one writes the other reads, byte for byte, in WAL mode', async () => {
    tmp = tempDir();
    const file = path.join(tmp.dir, 'sessions.sqlite');
    const uri = `sqlite://${file}`;
    const store = await KeyvSessionStore.open(uri);
    const plain = new Keyv<SessionEntry>({ store: new KeyvSqlite({ uri, table: 'keyv', keySize: 1024, busyTimeout: 5000 }), namespace: 'sessions' });
    const ours = [entry('agent:main:direct:1'), entry('agent:main:direct:2', ':) smiley'), entry('agent:main:direct:3', ':base64:aGk=')];
    for (const e of ours) await store.set(e);
    const raw = new Database(file, { readonly: true });
    // Committed when set resolves: another connection sees every row, as keyv would have written it.
    for (const e of ours) {
      const row = raw.prepare('SELECT value FROM keyv WHERE key = ?').get(`sessions:${e.key}`) as { value: string };
      expect(row.value).toBe(defaultSerialize({ value: e }));
      expect(await plain.get(e.key)).toEqual(e);
    }
    expect((raw.pragma('journal_mode') as { journal_mode: string }[])[0]?.journal_mode).toBe('wal');
    raw.close();
    const theirs = entry('agent:main:direct:4', ':written by plain keyv');
    await plain.set(theirs.key, theirs);
    expect(await store.get(theirs.key)).toEqual(theirs);
    expect(await store.count()).toBe(4);
    expect((await store.list({ limit: 10 })).entries.map((e) => e.displayName)).toEqual(['Ada', ':) smiley', ':base64:aGk=', ':written by plain keyv']);
    expect(await store.delete(ours[0]!.key)).toBe(true);
    expect(await plain.get(ours[0]!.key)).toBeUndefined();
    await plain.disconnect();
    await store.close();
  });

  it('a saved entry is written as it was when saved, even when it changes before its write starts', async () => {
    tmp = tempDir();
    const store = await KeyvSessionStore.open(`sqlite://${path.join(tmp.dir, 'sessions.sqlite')}`);
    const manager = new SessionManager({
      store, transcripts: new JsonlTranscriptStore({ dir: tmp.dir, logger: silentLogger() }), clock: new ManualClock(),
      logger: silentLogger(), maxActiveSessions: 10, expiresAt: () => Infinity,
    });
    const live = entry('agent:main:direct:9');
    const first = manager.save(live);
    live.messageCount = 4;
    const second = manager.save(live);
    // Not saved: a change after the last save stays out of the write already queued.
    live.messageCount = 99;
    live.displayName = 'changed later';
    await Promise.all([first, second]);
    expect(await store.get(live.key)).toMatchObject({ messageCount: 4, displayName: 'Ada' });
    await store.close();
  });
});
