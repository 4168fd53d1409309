import type pg from 'pg';
import type { TurnResult } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import { deliveryKey } from '../gateway/inbox.ts';
import type { QueuedJob, SharedQueue, SeenOutcome } from '../gateway/shared-queue.ts';
import { ClusterListener } from './cluster-listener.ts';
import { jsonbText, storableString } from './jsonb.ts';
import { LeaseLostError } from '../core/errors.ts';
import { currentFence, fencedClient, runFenced, type Fence } from './fence.ts';
import type { SessionLocks } from './session-locks.ts';

/** Counters of the work queue (exported in /metrics). */
export interface WorkQueueStats {
  /** Sessions claimed whose last attempt was made by another replica (a takeover). */
  takeovers: number;
  /** Messages run again after an attempt that did not finish. */
  reruns: number;
  /** Replies whose sending had started in an attempt that did not record it: the platform may have them twice. */
  duplicateWindows: number;
  /** Session locks lost with their connection. */
  leaseLosses: number;
}

/** Options of {@link PgWorkQueue}. */
export interface PgWorkQueueOptions {
  pool: pg.Pool;
  locks: SessionLocks;
  listener: ClusterListener;
  replicaId: string;
  logger: Logger;
  /** Sessions this replica claims at once (its `maxConcurrent`). */
  maxClaims: number;
  /** The poll fallback for missed notifications. */
  pollMs: number;
  /** How long an HTTP turn waits for its session's lock held by another replica. */
  lockWaitMs?: number;
  /** A session was claimed afresh: cached state of it may be stale. */
  onClaim?: (key: string) => void;
  /** How long delivery ids are remembered for the dedupe of redeliveries (default 48 h). */
  dedupeWindowMs?: number;
  /** How long finished messages (and their results, for waiters) are kept (default 24 h). */
  doneRetentionMs?: number;
  /** How often old rows are deleted (default 10 min). */
  pruneEveryMs?: number;
}

interface InboxRow { seq: string; message: InboundMessage; correlation_id: string; attempts: number; sent: number; sending: number }

const ACCEPT = `
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
SELECT seq, pg_notify('sb_ready', $2) FROM i`;

/**
 * Sessions with queued work whose lock nobody holds, oldest first. Sessions that live replicas are running are
 * left out here (an advisory lock on a bigint key shows in pg_locks as its two 32-bit halves), so a busy
 * cluster's oldest sessions cannot hide a dead replica's from the scan.
 */
const WAITING_UNLOCKED = `
WITH held AS (
  SELECT (classid::bigint << 32) | objid::bigint AS h FROM pg_locks
  WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT session_key FROM sb_lane WHERE next_seq > done_seq
  AND hashtextextended(session_key, 0) NOT IN (SELECT h FROM held)
ORDER BY ready_at LIMIT 64`;

/**
 * The cluster's work queue on PostgreSQL (SPEC §13): intake commits the message with a per-session sequence
 * before the platform is acknowledged; any replica claims a session with queued work by taking its lock and
 * runs its messages in sequence order; a finished message moves the session's `done_seq` through the lock's
 * connection, so a replica that lost the lock cannot mark anything done.
 */
export class PgWorkQueue implements SharedQueue {
  readonly stats: WorkQueueStats = { takeovers: 0, reruns: 0, duplicateWindows: 0, leaseLosses: 0 };
  private readonly working = new Map<string, { again: boolean }>();
  private readonly waiters = new Map<string, { resolve: (r: TurnResult | undefined) => void; promise: Promise<TurnResult | undefined> }>();
  private run: ((job: QueuedJob) => Promise<TurnResult | undefined>) | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private waiterTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private scanning = false;

  constructor(private readonly options: PgWorkQueueOptions) {
    // Waiting on results works from the start (a tool may wait before this replica claims any work).
    options.listener?.on('sb_done', (payload) => {
      const { key, seq } = JSON.parse(payload) as { key: string; seq: number };
      if (this.waiters.has(`${key}\u0000${seq}`)) void this.fetchResult(key, seq);
    });
  }

  async accept(message: InboundMessage, key: string, correlationId: string): Promise<{ accepted: true; seq: number } | { accepted: false }> {
    // The platform's raw update is not stored (as in the local inbox): a deeply nested one made JSON.stringify throw.
    const { raw: _raw, ...stored } = message;
    const { rows } = await this.options.pool.query<{ seq: string }>(ACCEPT, [storableString(deliveryKey(message)), key, jsonbText(stored), correlationId]);
    const seq = rows[0]?.seq;
    if (seq === undefined) return { accepted: false };
    // Most messages run where they arrived: try at once rather than on the notification's round trip.
    setImmediate(() => void this.claim(key));
    return { accepted: true, seq: Number(seq) };
  }

  async markSeen(message: InboundMessage, outcome: SeenOutcome): Promise<boolean> {
    const { rowCount } = await this.options.pool.query('INSERT INTO sb_delivery (delivery_key, outcome) VALUES ($1, $2) ON CONFLICT DO NOTHING', [storableString(deliveryKey(message)), outcome]);
    return rowCount === 1;
  }

  whenDone(key: string, seq: number): Promise<TurnResult | undefined> {
    const id = `${key}\u0000${seq}`;
    let waiter = this.waiters.get(id);
    if (!waiter) {
      let resolve!: (r: TurnResult | undefined) => void;
      const promise = new Promise<TurnResult | undefined>((r) => { resolve = r; });
      waiter = { resolve, promise };
      this.waiters.set(id, waiter);
      this.pollWaitersSoon();
    }
    return waiter.promise;
  }

  async runExclusive<T>(key: string, work: () => Promise<T>): Promise<T> {
    const lock = await this.options.locks.acquire(key, this.options.lockWaitMs ?? 120_000);
    if (!lock) throw new LeaseLostError(key, new Error('the session stayed locked by another replica'));
    if (lock.fresh) this.options.onClaim?.(key);
    try {
      return await runFenced(lock.fence, work);
    } finally {
      await lock.release();
    }
  }

  async lockLost(): Promise<boolean> {
    const fence = currentFence();
    if (!fence) return false;
    // A failed statement may be the first sign of a cut connection: ask the connection itself.
    if (fence.alive && (await fence.client.query('SELECT 1').then(() => true, () => false))) return false;
    fence.markLost();
    return true;
  }

  async sending(job: QueuedJob, index: number): Promise<void> {
    await this.fenced(job.key).query('UPDATE sb_inbox SET sending = $3 WHERE session_key = $1 AND seq = $2', [job.key, job.seq, index + 1]);
  }

  async sent(job: QueuedJob, count: number): Promise<void> {
    await this.fenced(job.key).query('UPDATE sb_inbox SET sent = $3 WHERE session_key = $1 AND seq = $2', [job.key, job.seq, count]);
  }

  /** Marks the job done and keeps its result for waiters on any replica; fails once the lock is lost. */
  async done(job: QueuedJob, result: TurnResult | undefined): Promise<void> {
    const client = this.fenced(job.key);
    const { rowCount } = await client.query(`
      WITH l AS (UPDATE sb_lane SET done_seq = $2 WHERE session_key = $1 AND done_seq = $2 - 1 RETURNING 1)
      UPDATE sb_inbox SET done_at = now(), result = $3 FROM l WHERE session_key = $1 AND seq = $2`,
    [job.key, job.seq, result ? jsonbText(result) : null]);
    if (rowCount !== 1) this.options.logger.error({ sessionKey: job.key, seq: job.seq }, 'a finished message was not the next of its session; left as it is');
    void this.options.pool.query('SELECT pg_notify($1, $2)', ['sb_done', JSON.stringify({ key: job.key, seq: job.seq })]).catch(() => undefined);
    this.settle(job.key, job.seq, result);
  }

  /** Starts claiming sessions with queued work; `run` runs one job and settles when it is done. */
  start(run: (job: QueuedJob) => Promise<TurnResult | undefined>): void {
    this.run = run;
    const { listener } = this.options;
    listener.on('sb_ready', (key) => void this.claim(key));
    const poll = () => {
      void this.scan();
      if (!this.closed) this.pollTimer = setTimeout(poll, this.options.pollMs).unref();
    };
    poll();
    const prune = () => { void this.prune().catch((err: unknown) => this.options.logger.warn({ err }, 'could not delete old queue rows')); };
    this.pruneTimer = setInterval(prune, this.options.pruneEveryMs ?? 600_000);
    this.pruneTimer.unref();
  }

  /**
   * Deletes delivery ids older than the dedupe window and finished messages older than their retention
   * (any replica may run it; it is idempotent). Returns how many rows of each went.
   */
  async prune(): Promise<{ deliveries: number; messages: number }> {
    const deliveries = await this.options.pool.query('DELETE FROM sb_delivery WHERE at < now() - make_interval(secs => $1)', [(this.options.dedupeWindowMs ?? 48 * 3_600_000) / 1000]);
    const messages = await this.options.pool.query('DELETE FROM sb_inbox WHERE done_at < now() - make_interval(secs => $1)', [(this.options.doneRetentionMs ?? 24 * 3_600_000) / 1000]);
    return { deliveries: deliveries.rowCount ?? 0, messages: messages.rowCount ?? 0 };
  }

  /** Stops claiming; running jobs finish on their lanes. */
  close(): void {
    this.closed = true;
    clearTimeout(this.pollTimer);
    clearInterval(this.pruneTimer);
    clearTimeout(this.waiterTimer);
    for (const w of this.waiters.values()) w.resolve(undefined);
    this.waiters.clear();
  }

  private fenced(key: string): pg.Client {
    const client = fencedClient(key);
    if (!client) throw new LeaseLostError(key, new Error('not running under the session lock'));
    return client;
  }

  private settle(key: string, seq: number, result: TurnResult | undefined): void {
    const id = `${key}\u0000${seq}`;
    const waiter = this.waiters.get(id);
    if (!waiter) return;
    this.waiters.delete(id);
    waiter.resolve(result);
  }

  private async fetchResult(key: string, seq: number): Promise<void> {
    const { rows } = await this.options.pool.query<{ result: TurnResult | null; done: boolean }>(
      'SELECT result, done_at IS NOT NULL AS done FROM sb_inbox WHERE session_key = $1 AND seq = $2', [key, seq],
    ).catch(() => ({ rows: [] as { result: TurnResult | null; done: boolean }[] }));
    if (rows[0]?.done) this.settle(key, seq, rows[0].result ?? undefined);
  }

  /** While anyone waits, finished messages are also looked up every pollMs (notifications can be lost). */
  private pollWaitersSoon(): void {
    if (this.waiterTimer || this.closed) return;
    this.waiterTimer = setTimeout(() => {
      this.waiterTimer = undefined;
      void this.pollWaiters().finally(() => { if (this.waiters.size) this.pollWaitersSoon(); });
    }, this.options.pollMs);
    this.waiterTimer.unref();
  }

  private async pollWaiters(): Promise<void> {
    for (const id of [...this.waiters.keys()]) {
      const [key, seq] = id.split('\u0000') as [string, string];
      await this.fetchResult(key, Number(seq));
    }
  }

  /** Looks for sessions with queued work nobody is running (the fallback for missed notifications). */
  private async scan(): Promise<void> {
    if (this.scanning || this.closed || !this.run || this.working.size >= this.options.maxClaims) return;
    this.scanning = true;
    try {
      const { rows } = await this.options.pool.query<{ session_key: string }>(
        WAITING_UNLOCKED,
      );
      for (const { session_key: key } of rows) {
        if (this.working.size >= this.options.maxClaims) break;
        // Not awaited: a claim runs its session's whole queue; the slots fill side by side.
        void this.claim(key);
      }
    } catch (error) {
      this.options.logger.warn({ err: error }, 'could not look for queued work; trying again');
    } finally {
      this.scanning = false;
    }
  }

  /** Takes a session's lock if free and runs its queued messages in order. */
  private async claim(key: string): Promise<void> {
    if (this.closed || !this.run) return;
    const busy = this.working.get(key);
    if (busy) { busy.again = true; return; }
    if (this.working.size >= this.options.maxClaims) return;
    const state = { again: false };
    this.working.set(key, state);
    let lock;
    try {
      lock = await this.options.locks.tryAcquire(key);
    } catch (error) {
      this.working.delete(key);
      this.options.logger.warn({ err: error, sessionKey: key }, 'could not try the lock of a session');
      return;
    }
    if (!lock) { this.working.delete(key); return; }
    if (lock.fresh) this.options.onClaim?.(key);
    let lost: boolean;
    let wasFull: boolean;
    try {
      lost = await runFenced(lock.fence, () => this.drain(key, lock.fence));
    } catch (error) {
      lost = !lock.fence.alive || error instanceof LeaseLostError;
      if (!lost) this.options.logger.error({ err: error, sessionKey: key }, 'running the queued messages of a session failed');
    } finally {
      await lock.release();
      wasFull = this.working.size >= this.options.maxClaims;
      this.working.delete(key);
    }
    // A lost lock was counted when its connection ended (SessionLocks' onLost).
    if (lost) return;
    // A message accepted while the lock was being given back found the session busy: look again.
    if (state.again || (await this.hasWork(key))) setImmediate(() => void this.claim(key));
    // A slot of a full replica is free: a session turned away meanwhile takes it now rather than at the next
    // poll (below capacity, sb_ready already claimed whatever was waiting; no query per turn for nothing).
    else if (wasFull) setImmediate(() => void this.scan());
  }

  private async hasWork(key: string): Promise<boolean> {
    const { rows } = await this.options.pool.query<{ w: boolean }>('SELECT next_seq > done_seq AS w FROM sb_lane WHERE session_key = $1', [key]).catch(() => ({ rows: [] as { w: boolean }[] }));
    return rows[0]?.w === true;
  }

  /** Runs the session's pending messages in sequence order; true when the lock was lost on the way. */
  private async drain(key: string, fence: Fence): Promise<boolean> {
    const client = fence.client;
    let last = -1;
    for (;;) {
      if (this.closed) return false;
      const { rows } = await client.query<InboxRow & { owner: string | null }>(`
        SELECT i.seq, i.message, i.correlation_id, i.attempts, i.sent, i.sending, l.owner FROM sb_lane l
        JOIN sb_inbox i ON i.session_key = l.session_key AND i.seq = l.done_seq + 1
        WHERE l.session_key = $1`, [key]);
      const row = rows[0];
      if (!row) return false;
      // The message just run is still not done (its done mark failed): leave it to the next poll.
      if (Number(row.seq) === last) return false;
      last = Number(row.seq);
      await client.query(`WITH l AS (UPDATE sb_lane SET owner = $3 WHERE session_key = $1)
        UPDATE sb_inbox SET attempts = attempts + 1 WHERE session_key = $1 AND seq = $2`, [key, row.seq, this.options.replicaId]);
      if (row.attempts > 0) {
        this.stats.reruns++;
        if (row.owner !== this.options.replicaId) this.stats.takeovers++;
        if (row.sending > row.sent) this.stats.duplicateWindows++;
      }
      const job: QueuedJob = {
        message: row.message, key, correlationId: row.correlation_id, seq: Number(row.seq),
        replayed: row.attempts > 0, sent: row.sent,
      };
      await this.run!(job);
      if (!fence.alive) return true;
    }
  }
}
