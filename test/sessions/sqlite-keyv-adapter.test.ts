import { statSync } from 'node:fs';
import path from 'node:path';
import KeyvSqlite from '@keyv/sqlite';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteKeyvAdapter } from '../../src/sessions/sqlite-keyv-adapter.ts';
import { tempDir } from '../helpers/gateway.ts';

// Group commit of the session store's writes: what a caller of `set` relies on (committed when it settles,
// in order, a bad write failing alone) and what it is for (a turn's writes share commits).

let tmp: ReturnType<typeof tempDir>;
let adapter: SqliteKeyvAdapter | undefined;

afterEach(async () => {
  await adapter?.disconnect().catch(() => undefined);
  adapter = undefined;
  tmp.remove();
});

async function openAdapter(): Promise<{ adapter: SqliteKeyvAdapter; file: string }> {
  tmp = tempDir();
  const file = path.join(tmp.dir, 'sessions.sqlite');
  const reader = new KeyvSqlite({ uri: `sqlite://${file}`, table: 'keyv', keySize: 1024, busyTimeout: 5000 });
  await reader.query('PRAGMA journal_mode=WAL');
  adapter = new SqliteKeyvAdapter({ reader, file, table: 'keyv', keySize: 1024, busyTimeoutMs: 5000 });
  await adapter.set('warm', 'x'); // opens the writing connection
  return { adapter, file };
}

/** Every row, read on a connection of its own: what another process would see now. */
function rowsOnDisk(file: string): Record<string, string> {
  const db = new Database(file, { readonly: true });
  try {
    const rows = db.prepare('SELECT key, value FROM keyv ORDER BY key').all() as { key: string; value: string }[];
    return Object.fromEntries(rows.map((r) => [r.key, r.value]));
  } finally {
    db.close();
  }
}

/** WAL frames written since the file was `before` bytes long (each frame: one page and its 24-byte header). */
function walFramesSince(file: string, before: number): number {
  const db = new Database(file, { readonly: true });
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  db.close();
  return (statSync(`${file}-wal`).size - before) / (pageSize + 24);
}

describe('SqliteKeyvAdapter group commit', () => {
  it('the writes of one loop turn share commits, and each is on disk when its promise settles', async () => {
    const { adapter, file } = await openAdapter();
    const walBefore = statSync(`${file}-wal`).size;
    const keys = Array.from({ length: 16 }, (_, i) => `sessions:agent:main:direct:${i}`);
    const writes = keys.map((key) => adapter.set(key, `{"value":"${key}"}`).then(() => rowsOnDisk(file)[key]));
    // Each promise settled only once its own row could be read from another connection.
    expect(await Promise.all(writes)).toEqual(keys.map((key) => `{"value":"${key}"}`));
    // Sixteen commits would write at least sixteen frames (the leaf page each time); two commits write a few.
    expect(walFramesSince(file, walBefore)).toBeLessThanOrEqual(6);
  });

  it('a write that fails fails alone: the others of its turn are committed', async () => {
    const { adapter, file } = await openAdapter();
    const db = new Database(file);
    db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON keyv WHEN NEW.key LIKE 'bad%' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
    db.close();
    // The first write of the turn is committed at once, the others together: a bad one in each place.
    const keys = ['bad-first', 'good-1', 'bad-in-batch', 'good-2', 'good-3'];
    const results = await Promise.allSettled(keys.map((key) => adapter.set(key, 'v')));
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(String((results[2] as PromiseRejectedResult).reason)).toContain('refused by the test');
    expect(Object.keys(rowsOnDisk(file))).toEqual(['good-1', 'good-2', 'good-3', 'warm']);
  });

  it('writes, deletes and clears of one turn apply in the order they were made', async () => {
    const { adapter, file } = await openAdapter();
    adapter.namespace = 'sessions';
    await Promise.all([
      adapter.set('same', '1'), adapter.set('same', '2'), adapter.set('same', '3'),
      adapter.set('gone', 'a'), adapter.delete('gone'),
      adapter.delete('back'), adapter.set('back', 'b'),
    ]);
    expect(rowsOnDisk(file)).toEqual({ same: '3', back: 'b', warm: 'x' });

    await Promise.all([adapter.set('sessions:a', '1'), adapter.set('sessions:b', '1'), adapter.clear(), adapter.set('sessions:c', '1')]);
    expect(Object.keys(rowsOnDisk(file))).toEqual(['back', 'same', 'sessions:c', 'warm']);
  });

  it('disconnect commits the writes still waiting for the end of the turn', async () => {
    const { adapter: opened, file } = await openAdapter();
    const writes = [opened.set('a', '1'), opened.set('b', '2'), opened.set('c', '3')];
    await opened.disconnect();
    adapter = undefined;
    await Promise.all(writes);
    expect(rowsOnDisk(file)).toEqual({ a: '1', b: '2', c: '3', warm: 'x' });
  });
});
