/**
 * The statements of the cluster's work queue (`pg-work-queue.ts`). `sb_lane.ready_at` is the acceptance time of
 * the session's oldest message not yet done: set by intake when the lane was idle, moved to the next message's
 * by the done mark (a replica of an older version leaves it at the earlier time, which only makes its lane look
 * older). Claims are ordered by it.
 */

/**
 * Intake: dedupe, the session's next sequence, the row, and (when $5) the `sb_ready` notification; returns the
 * sequence and the database's time. A replica that runs the message itself at once does not notify the others
 * (each would try the lock in vain); it notifies when it cannot take the lock after all.
 */
export const ACCEPT = `
WITH d AS (
  INSERT INTO sb_delivery (delivery_key, outcome) VALUES ($1, 'accepted') ON CONFLICT DO NOTHING RETURNING 1
), l AS (
  INSERT INTO sb_lane AS l (session_key, next_seq) SELECT $2, 1 FROM d
  ON CONFLICT (session_key) DO UPDATE SET next_seq = l.next_seq + 1,
    ready_at = CASE WHEN l.next_seq = l.done_seq THEN now() ELSE l.ready_at END
  RETURNING next_seq
), i AS (
  INSERT INTO sb_inbox (session_key, seq, delivery_key, message, correlation_id) SELECT $2, next_seq, $1, $3, $4 FROM l RETURNING seq
)
SELECT seq, (extract(epoch FROM now()) * 1000)::float8 AS now_ms, (SELECT pg_notify('sb_ready', $2) WHERE $5::boolean) AS notified FROM i`;

/**
 * Sessions with queued work whose lock nobody holds, the one whose oldest message waited longest first. Sessions
 * that live replicas are running are left out here (an advisory lock on a bigint key shows in pg_locks as its two
 * 32-bit halves), so a busy cluster's oldest sessions cannot hide a dead replica's from the scan.
 */
export const WAITING_UNLOCKED = `
WITH held AS (
  SELECT (classid::bigint << 32) | objid::bigint AS h FROM pg_locks
  WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT session_key, (extract(epoch FROM ready_at) * 1000)::float8 AS ready_ms, (extract(epoch FROM now()) * 1000)::float8 AS now_ms
FROM sb_lane WHERE next_seq > done_seq
  AND hashtextextended(session_key, 0) NOT IN (SELECT h FROM held)
ORDER BY ready_at LIMIT 64`;

/**
 * Under the session's lock: the session's next message, counted as one more attempt by this replica (the lane's
 * owner), in one statement. Returns the values from before the mark (attempts, owner), which tell a rerun and a
 * takeover apart.
 */
export const TAKE_NEXT = `
WITH cur AS (
  SELECT done_seq, owner FROM sb_lane WHERE session_key = $1
), o AS (
  UPDATE sb_lane SET owner = $2 WHERE session_key = $1 AND owner IS DISTINCT FROM $2
), n AS (
  UPDATE sb_inbox i SET attempts = i.attempts + 1 FROM cur
  WHERE i.session_key = $1 AND i.seq = cur.done_seq + 1 AND i.done_at IS NULL
  RETURNING i.seq, i.message, i.correlation_id, i.attempts - 1 AS attempts, i.sent, i.sending, i.live, (extract(epoch FROM i.accepted_at) * 1000)::float8 AS accepted_ms
)
SELECT n.*, cur.owner FROM n, cur`;

/**
 * Under the session's lock: the job is done with the messages its turn carried (seq $2 to $7, queue modes collect and
 * steer; $7 = $2 otherwise), with the result for waiters and the count of replies the platform took, the lane's
 * `ready_at` moves to the next message's acceptance, `sb_done` is notified on commit; returns how
 * many rows the mark applied to and the next message's acceptance time, if one is queued. With $6, when no message
 * follows, the lock is given back too (`unlocked`): after the inbox rows are updated, so another replica's claim that
 * gets the lock before this commits waits on them and sees the messages done.
 */
export const DONE = `
WITH nx AS (
  SELECT accepted_at FROM sb_inbox WHERE session_key = $1 AND seq = $7 + 1
), l AS (
  UPDATE sb_lane SET done_seq = $7, ready_at = coalesce((SELECT accepted_at FROM nx), ready_at)
  WHERE session_key = $1 AND done_seq = $2 - 1 AND next_seq >= $7 RETURNING next_seq
), i AS (
  UPDATE sb_inbox SET done_at = now(), result = $3, sent = greatest(sent, $4)
  FROM l WHERE session_key = $1 AND seq BETWEEN $2 AND $7 RETURNING 1
)
SELECT (SELECT count(*) FROM i)::int AS done, (SELECT (extract(epoch FROM accepted_at) * 1000)::float8 FROM nx) AS next_ms,
  (SELECT next_seq FROM l) AS next_seq, (SELECT pg_notify('sb_done', $5) WHERE EXISTS (SELECT 1 FROM i)) AS notified,
  (SELECT pg_advisory_unlock(hashtextextended($1, 0)) FROM l WHERE $6::boolean AND l.next_seq = $7 AND (SELECT count(*) FROM i) > 0) AS unlocked`;

/**
 * Under the session's lock: the messages queued after seq $2 and not done, oldest first, for the queue modes
 * (collect's burst, steer's hand-over, interrupt's look); nothing is marked.
 */
export const PENDING_AFTER = `
SELECT seq, message, correlation_id, attempts, sent, sending, live, (extract(epoch FROM accepted_at) * 1000)::float8 AS accepted_ms
FROM sb_inbox WHERE session_key = $1 AND seq > $2 AND done_at IS NULL ORDER BY seq LIMIT 50`;

/** Under the session's lock: messages $2 to $3 joined a running turn; one more attempt each, so a rerun after a crash is a replay. */
export const MARK_CARRIED = `
UPDATE sb_inbox SET attempts = attempts + 1 WHERE session_key = $1 AND seq BETWEEN $2 AND $3 AND done_at IS NULL`;

/**
 * {@link TAKE_NEXT} in the claim's lock statement (`lock`: the lock expression `SessionLocks` gives): nothing is
 * marked unless the lock was taken. The statement's snapshot is older than the lock; a message the previous holder
 * finished in between is not taken again (`done_at IS NULL` is checked again on the row's newest version), and
 * `pending` says that the session had work though none was taken then (the claim looks again).
 */
export const CLAIM_NEXT = (lock: string): string => `
WITH lk AS MATERIALIZED (
  SELECT ${lock} AS ok
), cur AS (
  SELECT l.done_seq, l.next_seq, l.owner FROM sb_lane l, lk WHERE l.session_key = $1 AND lk.ok
), o AS (
  UPDATE sb_lane SET owner = $2 FROM lk WHERE lk.ok AND session_key = $1 AND owner IS DISTINCT FROM $2
), n AS (
  UPDATE sb_inbox i SET attempts = i.attempts + 1 FROM cur
  WHERE i.session_key = $1 AND i.seq = cur.done_seq + 1 AND i.done_at IS NULL
  RETURNING i.seq, i.message, i.correlation_id, i.attempts - 1 AS attempts, i.sent, i.sending, i.live, (extract(epoch FROM i.accepted_at) * 1000)::float8 AS accepted_ms
)
SELECT lk.ok, (SELECT next_seq > done_seq FROM cur) AS pending, (SELECT owner FROM cur) AS owner, n.* FROM lk LEFT JOIN n ON true`;
