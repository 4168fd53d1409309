import { EventEmitter } from 'node:events';
import type KeyvSqlite from '@keyv/sqlite';
import type Database from 'better-sqlite3';
import type { KeyvStoreAdapter, StoredData } from 'keyv';

/** Options of {@link SqliteKeyvAdapter}. */
export interface SqliteKeyvAdapterOptions {
  /** The @keyv/sqlite store of the same file and table: it serves every read. */
  reader: KeyvSqlite;
  /** The database file (not `:memory:`, which a second connection would not share). */
  file: string;
  table: string;
  keySize: number;
  busyTimeoutMs: number;
}

/** The writing connection and its prepared statements. */
interface Writer {
  db: Database.Database;
  upsert: Database.Statement<[string, string]>;
  /** Upserts the writes in one transaction (rolled back whole if one fails). */
  upsertAll: Database.Transaction<(writes: readonly PendingWrite[]) => void>;
  remove: Database.Statement<[string]>;
  clear: Database.Statement<[string]>;
}

/** A `set` waiting for the next group commit. */
interface PendingWrite {
  key: string;
  value: string;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * A keyv store adapter over @keyv/sqlite's table (`key VARCHAR PRIMARY KEY, value TEXT`) whose writes skip
 * its per-query statement preparation: `set` and `delete` run prepared statements on a connection of their
 * own (better-sqlite3, WAL, `synchronous=NORMAL`), committed when they return, so a write is on disk (in the
 * WAL) before the promise keyv awaits settles. Reads, scans and counts stay with @keyv/sqlite, so the table
 * is exactly the one @keyv/sqlite (and any reader of it) knows. The driver is loaded and the connection
 * opened at the first write (some 20 ms, kept out of start-up). SQLite's automatic checkpoint (every 1,000
 * WAL pages) runs in the commit that crosses it and fsyncs: a stall of some milliseconds, where a
 * checkpoint on the other connection, concurrent with the writes, let the WAL grow without bound.
 *
 * Group commit: the first `set` of an event-loop turn is committed at once; the ones that follow in the same
 * turn wait for its end (`setImmediate`) and are committed together, in one transaction, each promise
 * settling after that commit. A commit's cost is its locks and WAL write more than its rows, and a busy
 * gateway settles many turns in one loop turn (the provider's answers arrive together): at 16 sessions
 * some 13 writes a turn, 2 commits instead of 13. A lone write (an idle gateway) waits for nothing. Writes
 * keep their order (the same key twice: the later value wins); `delete`, `clear` and `disconnect` commit
 * the waiting writes first. A batch that fails is written again one by one, so a bad write fails only its
 * own promise.
 */
export class SqliteKeyvAdapter extends EventEmitter implements KeyvStoreAdapter {
  // keyv reads `opts` (dialect, for its iterator) and sets `namespace`.
  readonly opts: KeyvSqlite['opts'];
  namespace?: string;
  private readonly options: SqliteKeyvAdapterOptions;
  private readonly reader: KeyvSqlite;
  private writer?: Writer;
  private opening?: Promise<Writer>;
  private closed = false;
  /** Writes after the first of this event-loop turn, committed together by {@link commitPending}. */
  private pending: PendingWrite[] = [];
  /** Whether a write was committed in this loop turn (and a commit of the ones after it is scheduled). */
  private commitScheduled = false;

  constructor(options: SqliteKeyvAdapterOptions) {
    super();
    this.options = options;
    this.reader = options.reader;
    this.opts = options.reader.opts;
  }

  /** Runs a query on the reading connection (@keyv/sqlite's). */
  query(sql: string, ...params: unknown[]): Promise<unknown[]> {
    return this.reader.query(sql, ...params) as Promise<unknown[]>;
  }

  get<Value>(key: string): Promise<StoredData<Value> | undefined> {
    return this.reader.get<Value>(key);
  }

  getMany<Value>(keys: string[]): Promise<StoredData<Value | undefined>[]> {
    return this.reader.getMany<Value>(keys);
  }

  has(key: string): Promise<boolean> {
    return this.reader.has(key);
  }

  /** Writes the serialized value; settles once it is committed (at once, or with the later writes of this turn). */
  async set(key: string, value: string): Promise<void> {
    const writer = this.writer ?? await this.open();
    if (this.commitScheduled) return new Promise<void>((resolve, reject) => { this.pending.push({ key, value, resolve, reject }); });
    this.commitScheduled = true;
    setImmediate(() => this.commitPending());
    writer.upsert.run(key, value);
  }

  async delete(key: string): Promise<boolean> {
    const writer = this.writer ?? await this.open();
    this.commitPending();
    return writer.remove.run(key).changes > 0;
  }

  async deleteMany(keys: string[]): Promise<boolean> {
    const writer = this.writer ?? await this.open();
    this.commitPending();
    let changes = 0;
    for (const key of keys) changes += writer.remove.run(key).changes;
    return changes > 0;
  }

  async clear(): Promise<void> {
    const writer = this.writer ?? await this.open();
    this.commitPending();
    writer.clear.run(this.namespace ? `${this.namespace}:%` : '%');
  }

  iterator<Value>(namespace?: string): AsyncGenerator<[string, Value | undefined], void> {
    return this.reader.iterator(namespace) as AsyncGenerator<[string, Value | undefined], void>;
  }

  async disconnect(): Promise<void> {
    this.closed = true;
    await this.opening?.catch(() => undefined);
    this.commitPending();
    this.writer?.db.close();
    this.writer = undefined;
    await this.reader.disconnect();
  }

  /** Commits the waiting writes in one transaction and settles their promises (synchronous: nothing interleaves). */
  private commitPending(): void {
    this.commitScheduled = false;
    const batch = this.pending;
    if (!batch.length) return;
    this.pending = [];
    const writer = this.writer;
    if (!writer) {
      const error = new Error('the session store is closed');
      for (const write of batch) write.reject(error);
      return;
    }
    if (batch.length > 1) {
      try {
        writer.upsertAll(batch);
        for (const write of batch) write.resolve();
        return;
      } catch {
        // Rolled back: written again one by one below, so that only the failing write fails.
      }
    }
    for (const write of batch) {
      try {
        writer.upsert.run(write.key, write.value);
        write.resolve();
      } catch (error) {
        write.reject(error);
      }
    }
  }

  /** Opens the writing connection once; a failed open is tried again by the next write. */
  private open(): Promise<Writer> {
    this.opening ??= this.connect().then((writer) => {
      if (this.closed) {
        writer.db.close();
        throw new Error('the session store is closed');
      }
      this.writer = writer;
      return writer;
    }, (error: unknown) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }

  private async connect(): Promise<Writer> {
    const { default: Driver } = await import('better-sqlite3');
    const { file, keySize, busyTimeoutMs } = this.options;
    const table = this.options.table.replace(/[^A-Za-z0-9_]/g, '');
    const db = new Driver(file, { timeout: busyTimeoutMs });
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      // The same table @keyv/sqlite creates, in case this connection comes first.
      db.exec(`CREATE TABLE IF NOT EXISTS ${table}(key VARCHAR(${keySize}) PRIMARY KEY, value TEXT )`);
      const upsert = db.prepare<[string, string]>(`INSERT INTO ${table} (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value`);
      return {
        db,
        upsert,
        upsertAll: db.transaction((writes: readonly PendingWrite[]) => {
          for (const write of writes) upsert.run(write.key, write.value);
        }),
        remove: db.prepare(`DELETE FROM ${table} WHERE key = ?`),
        clear: db.prepare(`DELETE FROM ${table} WHERE key LIKE ?`),
      };
    } catch (error) {
      db.close();
      throw error;
    }
  }
}
