import type pg from 'pg';

/**
 * The session locks held now, as the lock expression `SessionLocks` takes them and the work queue's scan reads them
 * (an advisory lock on a bigint key shows in pg_locks as its two 32-bit halves).
 */
const HELD = `WITH held AS (
  SELECT (classid::bigint << 32) | objid::bigint AS h FROM pg_locks
  WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
)`;

/** A session's work anywhere in the cluster, as `/admin/runs` shows it. */
export interface ClusterRunState {
  /** Some replica holds the session's lock: one of its turns (or an admin action on its lane) is running. */
  running: boolean;
  /** Messages accepted for it and not done yet (the running one included). */
  waiting: number;
}

/**
 * For each key: whether a replica (this one or another) holds its session lock, and its queued messages. The
 * lock table is the truth a notification could only report: it is right after a crash (the lock went with the
 * connection) and after a missed notification; one statement per `/admin/runs`, none per turn.
 */
const RUN_STATES = `
${HELD}
SELECT k AS key, hashtextextended(k, 0) IN (SELECT h FROM held) AS running,
  coalesce((SELECT next_seq - done_seq FROM sb_lane WHERE session_key = k), 0)::int AS waiting
FROM unnest($1::text[]) AS k`;

/** Reads {@link ClusterRunState} of `keys` in one statement. */
export async function clusterRunStates(pool: pg.Pool, keys: readonly string[]): Promise<Map<string, ClusterRunState>> {
  if (!keys.length) return new Map();
  const { rows } = await pool.query<{ key: string; running: boolean; waiting: number }>(RUN_STATES, [[...new Set(keys)]]);
  return new Map(rows.map((r) => [r.key, { running: r.running, waiting: Math.max(0, r.waiting) }]));
}

/**
 * The shared queue as a whole: sessions with accepted messages whose lock a replica holds (running), and the
 * accepted messages not done (the running ones included). One statement per `/status`, none per turn.
 */
const QUEUE_TOTALS = `
${HELD}
SELECT count(*) FILTER (WHERE hashtextextended(session_key, 0) IN (SELECT h FROM held))::int AS running,
  coalesce(sum(next_seq - done_seq), 0)::int AS waiting
FROM sb_lane WHERE next_seq > done_seq`;

/** Reads the shared queue's totals (see {@link QUEUE_TOTALS}). */
export async function clusterQueueTotals(pool: pg.Pool): Promise<{ running: number; waiting: number }> {
  const { rows } = await pool.query<{ running: number; waiting: number }>(QUEUE_TOTALS);
  return rows[0] ?? { running: 0, waiting: 0 };
}
