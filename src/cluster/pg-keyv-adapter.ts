import { EventEmitter } from 'node:events';
import type { KeyvStoreAdapter, StoredData } from 'keyv';
import type pg from 'pg';
import { querySession, type Queryable } from './session-query.ts';

/** Options of {@link PgKeyvAdapter}. */
export interface PgKeyvAdapterOptions {
  /** The shared pool of the cluster database. */
  pool: pg.Pool;
  /** The URI (keyv reads `opts.url`/`opts.dialect` to decide that the store can be iterated). */
  uri: string;
  /** Rows per page of {@link iterator} (default 100). */
  pageSize?: number;
}

/** The keyv namespace stripped off a stored key: the fence is keyed by the bare session key. */
function bareKey(key: string, namespace: string | undefined): string {
  return namespace && key.startsWith(`${namespace}:`) ? key.slice(namespace.length + 1) : key;
}

/** `LIKE` pattern of a namespace's keys (`%`, `_` and `\` escaped). */
function prefixPattern(namespace: string | undefined): string {
  return namespace ? `${namespace.replace(/[%_\\]/g, '\\$&')}:%` : '%';
}

/**
 * A keyv store adapter over @keyv/postgres's table (`keyv (key VARCHAR(1024) PRIMARY KEY, value TEXT)`,
 * created by the cluster migrations), with its exact SQL and stored form, so `@keyv/postgres` reads what it
 * writes and the other way round. The difference is where a statement runs: the rows of a session whose lock
 * the running code holds go through that session's lane connection (`fencedClient`, with keyv's namespace
 * stripped from the key), so a write after the lock was lost fails with `LeaseLostError` and a write inside the
 * lane's open transaction commits with it; every other statement runs on the shared pool (no pool of its own,
 * unlike @keyv/postgres, whose `disconnect()` ends a pool shared by every instance of one URI).
 */
export class PgKeyvAdapter extends EventEmitter implements KeyvStoreAdapter {
  /** keyv reads `dialect` (iterable adapters) and `url`. */
  readonly opts: { dialect: 'postgres'; url: string; table: 'keyv'; keySize: 1024 };
  namespace?: string;
  private readonly pool: pg.Pool;
  private readonly pageSize: number;

  constructor(options: PgKeyvAdapterOptions) {
    super();
    this.pool = options.pool;
    this.pageSize = Math.max(1, options.pageSize ?? 100);
    this.opts = { dialect: 'postgres', url: options.uri, table: 'keyv', keySize: 1024 };
  }

  private run<R extends pg.QueryResultRow>(key: string, sql: string, params: unknown[]): Promise<pg.QueryResult<R>> {
    return querySession<R>(this.pool, bareKey(key, this.namespace), sql, params);
  }

  async get<Value>(key: string): Promise<StoredData<Value> | undefined> {
    const { rows } = await this.run<{ value: string }>(key, 'SELECT value FROM keyv WHERE key = $1', [key]);
    return rows[0]?.value as StoredData<Value> | undefined;
  }

  async getMany<Value>(keys: string[]): Promise<StoredData<Value | undefined>[]> {
    const { rows } = await this.pool.query<{ key: string; value: string }>('SELECT key, value FROM keyv WHERE key = ANY($1)', [keys]);
    const byKey = new Map(rows.map((r) => [r.key, r.value]));
    return keys.map((k) => byKey.get(k) as StoredData<Value | undefined>);
  }

  async has(key: string): Promise<boolean> {
    const { rows } = await this.run<{ exists: boolean }>(key, 'SELECT EXISTS (SELECT 1 FROM keyv WHERE key = $1) AS exists', [key]);
    return rows[0]?.exists === true;
  }

  /** Upserts keyv's serialized value; committed (or part of the lane's transaction) when this returns. */
  async set(key: string, value: string): Promise<void> {
    await this.run(key, 'INSERT INTO keyv (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value]);
  }

  async setMany(entries: { key: string; value: string }[]): Promise<void> {
    for (const { key, value } of entries) await this.set(key, value);
  }

  async delete(key: string): Promise<boolean> {
    const { rowCount } = await this.run(key, 'DELETE FROM keyv WHERE key = $1', [key]);
    return (rowCount ?? 0) > 0;
  }

  async deleteMany(keys: string[]): Promise<boolean> {
    let deleted = false;
    for (const key of keys) deleted = (await this.delete(key)) || deleted;
    return deleted;
  }

  async clear(): Promise<void> {
    await this.pool.query(String.raw`DELETE FROM keyv WHERE key LIKE $1 ESCAPE '\'`, [prefixPattern(this.namespace)]);
  }

  /**
   * Every `[key, value]` of a namespace in key order (binary, whatever the database's collation), a page at a
   * time (keyset paging, never OFFSET).
   */
  async *iterator<Value>(namespace?: string): AsyncGenerator<[string, Value | undefined], void> {
    let after = namespace ? `${namespace}:` : '';
    const before = namespace ? `${namespace};` : null;
    for (;;) {
      const { rows } = await this.pool.query<{ key: string; value: string }>(
        'SELECT key, value FROM keyv WHERE key COLLATE "C" > $1 AND ($2::text IS NULL OR key COLLATE "C" < $2) ORDER BY key COLLATE "C" LIMIT $3',
        [after, before, this.pageSize],
      );
      for (const row of rows) yield [row.key, row.value as Value];
      if (rows.length < this.pageSize) return;
      after = rows[rows.length - 1]!.key;
    }
  }

  /** Runs a query on the shared pool (the session store's list and count). */
  async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> {
    return (await (this.pool as Queryable).query<R>(sql, params)).rows;
  }

  /** The pool belongs to the caller: nothing to close here. */
  async disconnect(): Promise<void> {}
}
