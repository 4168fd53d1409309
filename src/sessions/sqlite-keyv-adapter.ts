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
  remove: Database.Statement<[string]>;
  clear: Database.Statement<[string]>;
}

/**
 * A keyv store adapter over @keyv/sqlite's table (`key VARCHAR PRIMARY KEY, value TEXT`) whose writes skip
 * its per-query statement preparation: `set` and `delete` run prepared statements on a connection of their
 * own (better-sqlite3, WAL, `synchronous=NORMAL`), committed when they return, so a write is on disk (in the
 * WAL) before the promise keyv awaits settles. Reads, scans and counts stay with @keyv/sqlite, so the table
 * is exactly the one @keyv/sqlite (and any reader of it) knows. The driver is loaded and the connection
 * opened at the first write (some 20 ms, kept out of start-up). SQLite's automatic checkpoint (every 1,000
 * WAL pages, a few hundred writes) runs in the write that crosses it and fsyncs: a stall of some
 * milliseconds, where a checkpoint on the other connection, concurrent with the writes, let the WAL grow
 * without bound.
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

  /** Writes the serialized value; committed when this returns. */
  async set(key: string, value: string): Promise<void> {
    (this.writer ?? await this.open()).upsert.run(key, value);
  }

  async delete(key: string): Promise<boolean> {
    return (this.writer ?? await this.open()).remove.run(key).changes > 0;
  }

  async deleteMany(keys: string[]): Promise<boolean> {
    const writer = this.writer ?? await this.open();
    let changes = 0;
    for (const key of keys) changes += writer.remove.run(key).changes;
    return changes > 0;
  }

  async clear(): Promise<void> {
    (this.writer ?? await this.open()).clear.run(this.namespace ? `${this.namespace}:%` : '%');
  }

  iterator<Value>(namespace?: string): AsyncGenerator<[string, Value | undefined], void> {
    return this.reader.iterator(namespace) as AsyncGenerator<[string, Value | undefined], void>;
  }

  async disconnect(): Promise<void> {
    this.closed = true;
    await this.opening?.catch(() => undefined);
    this.writer?.db.close();
    this.writer = undefined;
    await this.reader.disconnect();
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
      return {
        db,
        upsert: db.prepare(`INSERT INTO ${table} (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value`),
        remove: db.prepare(`DELETE FROM ${table} WHERE key = ?`),
        clear: db.prepare(`DELETE FROM ${table} WHERE key LIKE ?`),
      };
    } catch (error) {
      db.close();
      throw error;
    }
  }
}
