import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Keyv, { type KeyvStoreAdapter } from 'keyv';
import KeyvSqlite from '@keyv/sqlite';
import { LeaseLostError, StoreError } from '../core/errors.ts';
import type { SessionEntry } from './entry.ts';
import { deserializeKeyv, serializeKeyv } from './keyv-codec.ts';
import { SqliteKeyvAdapter } from './sqlite-keyv-adapter.ts';

/** Filters of {@link SessionStore.list}. */
export interface ListSessionsOptions {
  channel?: string;
  /** Only this agent's sessions. */
  agentId?: string;
  /** At most this many (default 100, max 1000). */
  limit?: number;
  /** The `nextCursor` of the previous page. */
  cursor?: string;
}

/** One page of sessions, ordered by key. */
export interface SessionPage {
  entries: SessionEntry[];
  nextCursor?: string;
}

/** Persistent session entries (keyv). */
export interface SessionStore {
  get(key: string): Promise<SessionEntry | undefined>;
  set(entry: SessionEntry): Promise<void>;
  delete(key: string): Promise<boolean>;
  list(options?: ListSessionsOptions): Promise<SessionPage>;
  count(): Promise<number>;
  close(): Promise<void>;
  /**
   * The entry in the form the store writes, serialized now (optional). The manager freezes each save with it
   * instead of a deep copy and writes the text later with {@link setSerialized}: one serialization per write.
   */
  serialize?(entry: SessionEntry): string;
  /** Writes an entry serialized by {@link serialize}. */
  setSerialized?(key: string, serialized: string): Promise<void>;
}

const NAMESPACE = 'sessions';

/** A value already in keyv's stored form (from {@link KeyvSessionStore.serialize}); keyv writes it as it is. */
class Serialized {
  constructor(readonly text: string) {}
}

/** keyv's serializer: its own format, written once (no TTL is ever set, so `expires` is always absent). */
const serialize = (data: { value?: unknown; expires?: number | null }): string =>
  data.value instanceof Serialized ? data.value.text : serializeKeyv(data);

/** One row of a keyv table: the namespaced key and keyv's stored text. */
export interface KeyValueRow {
  key: string;
  value: string;
}

/**
 * A keyv table read in binary key order, which list and count page through instead of keyv's iterator
 * (SQLite's here; cluster mode's PostgreSQL one in `src/cluster/pg-session-store.ts`).
 */
export interface KeyvTable {
  /** Up to `limit` rows with `after < key < before`, in key order. */
  rowsBetween(after: string, before: string, limit: number): Promise<KeyValueRow[]>;
  /** How many keys lie strictly between `after` and `before`. */
  countBetween(after: string, before: string): Promise<number>;
}

/** A keyv storage adapter opened elsewhere, and how to read and close it ({@link KeyvSessionStore.over}). */
export interface KeyvSessionBackend {
  adapter: KeyvStoreAdapter;
  table: KeyvTable;
  /** Closes what the opener opened besides the adapter (its own pool). */
  close?: () => Promise<void>;
}

/** What the SQLite table is read through: @keyv/sqlite, or the adapter that reads through it. */
type Queryable = { query(sql: string, ...params: unknown[]): Promise<unknown> };

/** The `keyv` table of a SQLite file. */
function sqliteTable(sqlite: Queryable): KeyvTable {
  return {
    rowsBetween: async (after, before, limit) => (await sqlite.query(
      'SELECT key, value FROM keyv WHERE key > ? AND key < ? ORDER BY key LIMIT ?', after, before, limit,
    )) as KeyValueRow[],
    countBetween: async (after, before) => {
      const rows = (await sqlite.query('SELECT count(*) AS n FROM keyv WHERE key > ? AND key < ?', after, before)) as { n: number }[];
      return rows[0]?.n ?? 0;
    },
  };
}

const keyvOptions = { namespace: NAMESPACE, serialize, deserialize: deserializeKeyv, throwOnErrors: true } as const;

/**
 * Session entries in keyv. With a `sqlite://` URI the table is `@keyv/sqlite`'s, in WAL mode (readers in other
 * processes, such as `switchboard sessions`, never block the gateway); @keyv/sqlite reads it and pages with an
 * index range scan, and writes go through {@link SqliteKeyvAdapter} (prepared statements on a connection of
 * their own). Every value is serialized once, in keyv's own format. Other backends (cluster mode's) are
 * opened by their own module and passed to {@link KeyvSessionStore.over}.
 */
export class KeyvSessionStore implements SessionStore {
  private readonly keyv: Keyv<SessionEntry>;
  private readonly table?: KeyvTable;
  private readonly ready: Promise<void>;
  private readonly closeBackend?: () => Promise<void>;

  private constructor(keyv: Keyv<SessionEntry>, table: KeyvTable | undefined, ready: Promise<void>, closeBackend?: () => Promise<void>) {
    this.keyv = keyv;
    this.table = table;
    this.ready = ready;
    this.closeBackend = closeBackend;
  }

  /**
   * Opens a local store at a keyv URI: `sqlite://path`, or any keyv adapter URI whose package is installed.
   * Cluster mode's PostgreSQL store is built by `src/stores.ts`, never here.
   */
  static async open(uri: string): Promise<KeyvSessionStore> {
    if (uri.startsWith('sqlite://')) {
      const file = uri.slice('sqlite://'.length);
      if (file !== ':memory:') mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
      const sqlite = new KeyvSqlite({ uri, table: 'keyv', keySize: 1024, busyTimeout: 5000 });
      let adapter: KeyvSqlite | SqliteKeyvAdapter = sqlite;
      const ready = (async () => {
        await sqlite.query('PRAGMA journal_mode=WAL');
        await sqlite.query('PRAGMA synchronous=NORMAL');
        // A second connection to `:memory:` would be another database: there @keyv/sqlite writes too.
        if (file !== ':memory:') adapter = new SqliteKeyvAdapter({ reader: sqlite, file, table: 'keyv', keySize: 1024, busyTimeoutMs: 5000 });
      })().catch(async (error: unknown) => {
        await sqlite.disconnect().catch(() => undefined);
        throw new StoreError(`Cannot open the session store at ${file}: ${(error as Error).message}. Check that the folder is writable.`, error);
      });
      await ready;
      const keyv = new Keyv<SessionEntry>({ store: adapter, useKeyPrefix: true, ...keyvOptions });
      return new KeyvSessionStore(keyv, sqliteTable(adapter), ready);
    }
    const scheme = uri.split(':')[0] ?? '';
    let adapter: unknown;
    try {
      const mod = (await import(`@keyv/${scheme}`)) as { default: new (uri: string) => unknown };
      adapter = new mod.default(uri);
    } catch (error) {
      throw new StoreError(`The store URI "${scheme}://..." needs the package @keyv/${scheme}: run npm install @keyv/${scheme}, or use sqlite://.`, error);
    }
    const keyv = new Keyv<SessionEntry>({ store: adapter as never, ...keyvOptions });
    return new KeyvSessionStore(keyv, undefined, Promise.resolve());
  }

  /** A store over a backend another module opened (cluster mode: `src/cluster/pg-session-store.ts`). */
  static over(backend: KeyvSessionBackend): KeyvSessionStore {
    const keyv = new Keyv<SessionEntry>({ store: backend.adapter, useKeyPrefix: true, ...keyvOptions });
    return new KeyvSessionStore(keyv, backend.table, Promise.resolve(), backend.close);
  }

  async get(key: string): Promise<SessionEntry | undefined> {
    try {
      return (await this.keyv.get(key)) ?? undefined;
    } catch (error) {
      if (error instanceof LeaseLostError) throw error;
      throw new StoreError(`Reading session ${key} failed: ${(error as Error).message}`, error);
    }
  }

  async set(entry: SessionEntry): Promise<void> {
    await this.setSerialized(entry.key, this.serialize(entry));
  }

  serialize(entry: SessionEntry): string {
    return serializeKeyv({ value: entry });
  }

  async setSerialized(key: string, serialized: string): Promise<void> {
    let ok: boolean;
    try {
      ok = await this.keyv.set(key, new Serialized(serialized) as unknown as SessionEntry);
    } catch (error) {
      if (error instanceof LeaseLostError) throw error;
      throw new StoreError(`Writing session ${key} failed: ${(error as Error).message}`, error);
    }
    if (!ok) throw new StoreError(`Writing session ${key} failed.`);
  }

  async delete(key: string): Promise<boolean> {
    return this.keyv.delete(key);
  }

  async list(options: ListSessionsOptions = {}): Promise<SessionPage> {
    const limit = Math.min(Math.max(options.limit ?? 100, 1), 1000);
    const table = this.table;
    if (table) return this.pageByKey(options, limit, (after, n) => table.rowsBetween(after, `${NAMESPACE};`, n));
    const all: SessionEntry[] = [];
    for await (const [, value] of this.keyv.iterator!(NAMESPACE) as AsyncGenerator<[string, SessionEntry]>) {
      if ((!options.channel || value.channel === options.channel) && (!options.agentId || value.agentId === options.agentId)) all.push(value);
    }
    all.sort((a, b) => (a.key < b.key ? -1 : 1));
    const start = options.cursor ? all.findIndex((e) => e.key > options.cursor!) : 0;
    const page = start < 0 ? [] : all.slice(start, start + limit);
    return { entries: page, nextCursor: start >= 0 && start + limit < all.length ? page[page.length - 1]?.key : undefined };
  }

  async count(): Promise<number> {
    if (this.table) return this.table.countBetween(`${NAMESPACE}:`, `${NAMESPACE};`);
    let n = 0;
    for await (const _ of this.keyv.iterator!(NAMESPACE)) n++;
    return n;
  }

  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    await this.keyv.disconnect();
    await this.closeBackend?.();
  }

  /** {@link list} over the `keyv` table in key order, a page at a time from the cursor. */
  private async pageByKey(options: ListSessionsOptions, limit: number, fetch: (after: string, n: number) => Promise<KeyValueRow[]>): Promise<SessionPage> {
    const entries: SessionEntry[] = [];
    let after = `${NAMESPACE}:${options.cursor ?? ''}`;
    // Scan in pages so a channel filter still returns up to `limit` rows.
    for (;;) {
      const rows = await fetch(after, limit + 1);
      for (const row of rows) {
        const entry = await this.decode(row.value);
        after = row.key;
        if (!entry || (options.channel && entry.channel !== options.channel) || (options.agentId && entry.agentId !== options.agentId)) continue;
        if (entries.length === limit) return { entries, nextCursor: entries[entries.length - 1]?.key };
        entries.push(entry);
      }
      if (rows.length <= limit) return { entries };
    }
  }

  /** The key an entry is stored under in the `keyv` table (keyv's namespace prefix). */
  storedKeyOf(key: string): string {
    return `${NAMESPACE}:${key}`;
  }

  /** An entry from the `keyv` table's text, as {@link get} reads it (for a caller that read the row itself). */
  decodeStored(raw: string): Promise<SessionEntry | undefined> {
    return this.decode(raw);
  }

  private async decode(raw: string): Promise<SessionEntry | undefined> {
    const data = await this.keyv.deserialize!<SessionEntry>(raw);
    return data?.value;
  }
}
