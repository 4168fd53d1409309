import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import Keyv from 'keyv';
import sqlite3 from 'sqlite3';
import { emptyTokens, type SessionEntry } from '../src/sessions/entry.ts';

/** A realistic stored entry (after a few turns). */
export function sampleEntry(i: number, now = Date.now()): SessionEntry {
  const peer = String(100000 + i);
  return {
    key: `agent:main:telegram:direct:${peer}`, sessionId: randomUUID(), agentId: 'main', channel: 'telegram', accountId: 'default',
    chatType: 'direct', peerId: peer, displayName: `User ${peer}`, createdAt: now - 86_400_000, updatedAt: now, sessionStartedAt: now - 3_600_000,
    state: 'active', runState: 'idle', overrides: {}, tokens: { ...emptyTokens(), input: 1234, output: 456 }, contextTokens: 1690,
    compactionCount: 0, messageCount: 6, lastRequestAt: now,
    deliveryTarget: { channel: 'telegram', accountId: 'default', chatId: peer, chatType: 'direct', replyToId: '991', peerId: peer },
  };
}

/** The row value keyv writes for an entry (its own serializer, so the gateway reads these rows as its own). */
export async function serializedRow(entry: SessionEntry): Promise<string> {
  const keyv = new Keyv();
  return await keyv.serialize!({ value: entry, expires: undefined });
}

function run(db: sqlite3.Database, sql: string, ...params: unknown[]): Promise<void> {
  return new Promise((resolve, reject) => db.run(sql, params, (e) => (e ? reject(e) : resolve())));
}

/** Writes `count` session entries straight into `<file>` in keyv's table layout, in batched transactions. */
export async function populateSessions(file: string, count: number): Promise<void> {
  mkdirSync(path.dirname(file), { recursive: true });
  const db = new sqlite3.Database(file);
  await run(db, 'PRAGMA journal_mode=WAL');
  await run(db, 'PRAGMA synchronous=OFF');
  await run(db, 'CREATE TABLE IF NOT EXISTS keyv(key VARCHAR(1024) PRIMARY KEY, value TEXT )');
  const template = await serializedRow(sampleEntry(0));
  const sample = sampleEntry(0);
  const batch = 20_000;
  for (let start = 0; start < count; start += batch) {
    await run(db, 'BEGIN');
    const stmt = db.prepare('INSERT OR REPLACE INTO keyv (key, value) VALUES (?, ?)');
    const end = Math.min(count, start + batch);
    await new Promise<void>((resolve, reject) => {
      db.serialize(() => {
        for (let i = start; i < end; i++) {
          const peer = String(100000 + i);
          const value = template.replaceAll(`"${sample.peerId}"`, `"${peer}"`).replace(sample.key, `agent:main:telegram:direct:${peer}`).replace(sample.sessionId, randomUUID());
          stmt.run(`sessions:agent:main:telegram:direct:${peer}`, value);
        }
        stmt.finalize((e) => (e ? reject(e) : resolve()));
      });
    });
    await run(db, 'COMMIT');
  }
  await run(db, 'PRAGMA wal_checkpoint(TRUNCATE)');
  await new Promise<void>((resolve) => db.close(() => resolve()));
}

/**
 * Writes `count` files into a media store folder as `FileMediaStore.put` leaves them: `<dir>/<sha256>` (the
 * name is the hash of the bytes: `bytes` random bytes each) and its sidecar `<dir>/<sha256>.json` with the mime type.
 */
export async function populateMedia(dir: string, count: number, bytes = 256): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const batch = 64;
  for (let start = 0; start < count; start += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, count - start) }, async () => {
      const data = randomBytes(bytes);
      const sha256 = createHash('sha256').update(data).digest('hex');
      await writeFile(path.join(dir, `${sha256}.json`), JSON.stringify({ mime: 'image/jpeg' }));
      await writeFile(path.join(dir, sha256), data);
    }));
  }
}
