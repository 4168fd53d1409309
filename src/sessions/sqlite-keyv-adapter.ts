import { EventEmitter } from 'node:events';
import type KeyvSqlite from '@keyv/sqlite';
import Database from 'better-sqlite3';
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

/**
 * A keyv store adapter over @keyv/sqlite's table (`key VARCHAR PRIMARY KEY, value TEXT`) whose writes skip
 * its per-query statement preparation: `set` and `delete` run prepared statements on a connection of their
 * own (better-sqlite3, WAL, `synchronous=NORMAL`), committed when they return, so a write is on disk (in the
 * WAL) before the promise keyv awaits settles. Reads, scans and counts stay with @keyv/sqlite, so the table
 * is exactly the one @keyv/sqlite (and any reader of it) knows. SQLite's automatic checkpoint (every 1,000
 * WAL pages, a few hundred writes) runs in the write that crosses it and fsyncs: a stall of some
 * milliseconds, where a checkpoint on the other connection, concurrent with the writes, let the WAL grow
 * without bound.
 */
export class SqliteKeyvAdapter extends EventEmitter implements KeyvStoreAdapter {
  // keyv reads `opts` (dialect, for its iterator) and sets `namespace`.
  readonly opts: KeyvSqlite['opts'];
  namespace?: string;
  private readonly reader: KeyvSqlite;
  private readonly table: string;
  private readonly db: Database.Database;
  private readonly upsert: Database.Statement<[string, string]>;
  private readonly remove: Database.Statement<[string]>;

  constructor(options: SqliteKeyvAdapterOptions) {
    super();
    this.reader = options.reader;
    this.opts = options.reader.opts;
    const table = options.table.replace(/[^A-Za-z0-9_]/g, '');
    this.table = table;
    this.db = new Database(options.file, { timeout: options.busyTimeoutMs });
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = NORMAL');
      // The same table @keyv/sqlite creates, in case this connection comes first.
      this.db.exec(`CREATE TABLE IF NOT EXISTS ${table}(key VARCHAR(${options.keySize}) PRIMARY KEY, value TEXT )`);
      this.upsert = this.db.prepare(`INSERT INTO ${table} (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value`);
      this.remove = this.db.prepare(`DELETE FROM ${table} WHERE key = ?`);
    } catch (error) {
      this.db.close();
      throw error;
    }
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
    this.upsert.run(key, value);
  }

  async delete(key: string): Promise<boolean> {
    return this.remove.run(key).changes > 0;
  }

  async deleteMany(keys: string[]): Promise<boolean> {
    let changes = 0;
    for (const key of keys) changes += this.remove.run(key).changes;
    return changes > 0;
  }

  async clear(): Promise<void> {
    this.db.prepare(`DELETE FROM ${this.table} WHERE key LIKE ?`).run(this.namespace ? `${this.namespace}:%` : '%');
  }

  iterator<Value>(namespace?: string): AsyncGenerator<[string, Value | undefined], void> {
    return this.reader.iterator(namespace) as AsyncGenerator<[string, Value | undefined], void>;
  }

  async disconnect(): Promise<void> {
    this.db.close();
    await this.reader.disconnect();
  }
}
