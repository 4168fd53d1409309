import type pg from 'pg';
import { LeaseLostError } from '../core/errors.ts';
import { fencedClient } from './fence.ts';

/** What the cluster stores query: the shared pool, or one of its clients. */
export type Queryable = Pick<pg.Pool, 'query'>;

/**
 * True for an error that means the connection itself went away (terminated by an administrator or by
 * `idle_session_timeout`, reset, closed): on a lane connection that is the loss of the session's lock.
 */
export function isConnectionLoss(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string') return /^(08|57P)/.test(code);
  return typeof message === 'string' && /terminated|not queryable|connection (error|ended|reset)|ECONNRESET|EPIPE/i.test(message);
}

/**
 * Runs one statement on the rows of session `key`: through the session's lane connection when the running
 * code holds its lock (see `fencedClient`), else through `pool`. A statement on a lane connection that is
 * gone fails with {@link LeaseLostError}: nothing of a turn whose lock was lost is written.
 */
export async function querySession<R extends pg.QueryResultRow = pg.QueryResultRow>(
  pool: Queryable, key: string, sql: string, params: unknown[] = [],
): Promise<pg.QueryResult<R>> {
  const client = fencedClient(key);
  if (!client) return pool.query<R>(sql, params);
  try {
    return await client.query<R>(sql, params);
  } catch (error) {
    if (isConnectionLoss(error)) throw new LeaseLostError(key, error);
    throw error;
  }
}
