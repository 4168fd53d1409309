import pg from 'pg';
import { KeyvSessionStore, type KeyvTable } from '../sessions/store.ts';
import { PgKeyvAdapter } from './pg-keyv-adapter.ts';

/** Options of {@link openPgSessionStore}. */
export interface PgSessionStoreOptions {
  /** The cluster database's URI. */
  uri: string;
  /** The cluster's shared pool (else the store opens a small one of its own, closed with it). */
  pool?: pg.Pool;
}

/** The `keyv` table of the cluster database, in binary key order (as SQLite compares keys), read on the shared pool. */
function pgTable(adapter: PgKeyvAdapter): KeyvTable {
  return {
    rowsBetween: (after, before, limit) => adapter.query<{ key: string; value: string }>(
      'SELECT key, value FROM keyv WHERE key COLLATE "C" > $1 AND key COLLATE "C" < $2 ORDER BY key COLLATE "C" LIMIT $3', [after, before, limit],
    ),
    countBetween: async (after, before) => {
      const rows = await adapter.query<{ n: number }>('SELECT count(*)::int AS n FROM keyv WHERE key COLLATE "C" > $1 AND key COLLATE "C" < $2', [after, before]);
      return rows[0]?.n ?? 0;
    },
  };
}

/**
 * The session store of cluster mode: entries in @keyv/postgres's `keyv` table, written through
 * {@link PgKeyvAdapter}, so a session's rows go through its lane connection while the running code holds its lock.
 */
export function openPgSessionStore(options: PgSessionStoreOptions): KeyvSessionStore {
  const ownPool = options.pool ? undefined : new pg.Pool({ connectionString: options.uri, max: 4 });
  ownPool?.on('error', () => undefined);
  const adapter = new PgKeyvAdapter({ pool: options.pool ?? ownPool!, uri: options.uri });
  return KeyvSessionStore.over({ adapter, table: pgTable(adapter), close: ownPool && (() => ownPool.end()) });
}
