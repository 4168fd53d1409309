import type pg from 'pg';
import type { GroupContextItem } from '../agent/turn-input.ts';
import { storableString } from './jsonb.ts';
import { querySession, type Queryable } from './session-query.ts';

/** Options of {@link PgGroupContext}. */
export interface PgGroupContextOptions {
  pool: pg.Pool;
  /** Items kept per session key, newest kept (SPEC §10: 50); 0 keeps none. */
  limit: number;
}

/**
 * Group messages that did not trigger a run (SPEC §10), kept per session key in `sb_group_context` so the
 * replica that runs the next triggered turn finds them whichever replica took the skipped ones: the cluster's
 * `GroupContextBuffer`, with the same item shape and cap (the oldest dropped).
 */
export class PgGroupContext {
  private readonly pool: pg.Pool;
  private readonly limit: number;

  constructor(options: PgGroupContextOptions) {
    this.pool = options.pool;
    this.limit = Math.max(0, Math.floor(options.limit));
  }

  /**
   * Keeps one item, then drops the key's oldest beyond the limit. `db` is the intake transaction's client
   * when the skip is recorded with the delivery (both commit together); the pool otherwise.
   */
  async add(key: string, item: GroupContextItem, db: Queryable = this.pool): Promise<void> {
    if (this.limit === 0) return;
    await db.query('INSERT INTO sb_group_context (session_key, at, name, text) VALUES ($1, $2, $3, $4)', [key, new Date(item.at), storableString(item.name), storableString(item.text)]);
    await db.query(
      'DELETE FROM sb_group_context WHERE session_key = $1 AND id IN (SELECT id FROM sb_group_context WHERE session_key = $1 ORDER BY id DESC OFFSET $2)',
      [key, this.limit],
    );
  }

  /**
   * Returns and deletes what was kept for a key, oldest first; undefined when nothing was. Runs on the
   * session's lane connection when the caller holds its lock (so it commits, or not, with the turn).
   */
  async take(key: string): Promise<GroupContextItem[] | undefined> {
    const { rows } = await querySession<{ id: string; at: Date; name: string; text: string }>(
      this.pool, key, 'DELETE FROM sb_group_context WHERE session_key = $1 RETURNING id, at, name, text', [key],
    );
    if (!rows.length) return undefined;
    return rows.sort((a, b) => Number(a.id) - Number(b.id)).map((r) => ({ name: r.name, text: r.text, at: r.at.getTime() }));
  }

  /** Items kept for a key. */
  async size(key: string): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM sb_group_context WHERE session_key = $1', [key]);
    return rows[0]?.n ?? 0;
  }
}
