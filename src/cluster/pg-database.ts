import pg from 'pg';
import type { Logger } from '../core/logger.ts';
import { SwitchboardError } from '../core/errors.ts';
import { MIGRATIONS, type Migration } from './schema.ts';

/** The cluster database could not be reached or migrated. */
export class ClusterStoreError extends SwitchboardError {
  constructor(message: string, cause?: unknown) {
    super('CLUSTER_STORE', message, { cause });
  }
}

/** True for the store URIs that switch on cluster mode. */
export function isClusterStore(uri: string): boolean {
  return /^postgres(ql)?:\/\//.test(uri);
}

/** The URI with its password replaced, for log lines and errors. */
export function redactUri(uri: string): string {
  try {
    const url = new URL(uri);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return 'postgres://…';
  }
}

// Both sides of the lock ids are fixed: hashtextextended() of these names (see lockId()).
const MIGRATION_LOCK = 'switchboard:migrate';

/** Applies the migrations not yet applied, once across replicas starting together. Returns the ids applied. */
export async function migrate(pool: pg.Pool, migrations: readonly Migration[] = MIGRATIONS): Promise<string[]> {
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS sb_migration (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const done = new Set((await client.query<{ id: string }>('SELECT id FROM sb_migration')).rows.map((r) => r.id));
    for (const migration of [...migrations].sort((a, b) => a.id.localeCompare(b.id))) {
      if (done.has(migration.id)) continue;
      await client.query('BEGIN');
      try {
        await client.query(migration.sql);
        await client.query('INSERT INTO sb_migration (id) VALUES ($1)', [migration.id]);
        await client.query('COMMIT');
        applied.push(migration.id);
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw new ClusterStoreError(`Migration ${migration.id} of the cluster database failed: ${(error as Error).message}`, error);
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [MIGRATION_LOCK]).catch(() => undefined);
    client.release();
  }
  return applied;
}

/** Options of {@link openClusterDatabase}. */
export interface ClusterDatabaseOptions {
  uri: string;
  logger: Logger;
  /** Connections of the shared pool (intake, reads, ledger). Lane connections are separate. */
  poolSize?: number;
}

/**
 * Opens the shared pool and brings the schema up to date. A database that cannot be reached is a
 * {@link ClusterStoreError} naming the (redacted) URI.
 */
export async function openClusterDatabase(options: ClusterDatabaseOptions): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: options.uri, max: options.poolSize ?? 8, connectionTimeoutMillis: 10_000 });
  // An idle client that loses its connection emits 'error' on the pool; without a listener that is fatal.
  pool.on('error', (err) => options.logger.warn({ err }, 'a pooled PostgreSQL connection failed'));
  try {
    const applied = await migrate(pool);
    if (applied.length) options.logger.info({ applied }, 'cluster database migrated');
  } catch (error) {
    await pool.end().catch(() => undefined);
    if (error instanceof ClusterStoreError) throw error;
    throw new ClusterStoreError(`Cannot use the cluster database at ${redactUri(options.uri)}: ${(error as Error).message}. Check that PostgreSQL (14 or newer) runs there and the URI's user may create tables.`, error);
  }
  return pool;
}
