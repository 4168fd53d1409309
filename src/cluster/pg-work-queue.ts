import type pg from 'pg';
import type { TurnResult } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import { deliveryKey } from '../gateway/inbox.ts';
import type { QueueModePolicy, QueuedJob, SharedQueue, SeenOutcome } from '../gateway/shared-queue.ts';
import { ClaimedQueueModes, type ClaimedTurn, type QueueRow } from './claimed-queue-modes.ts';
import { ClaimOrder } from './claim-order.ts';
import { DoneWaiters } from './done-waiters.ts';
import { clusterRunStates } from './run-states.ts';
import { ClusterListener } from './cluster-listener.ts';
import { jsonbText, storableString } from './jsonb.ts';
import { LeaseLostError } from '../core/errors.ts';
import { currentFence, fencedClient, runFenced, type Fence } from './fence.ts';
import type { SessionLocks } from './session-locks.ts';
import { ACCEPT, CLAIM_NEXT, DONE, TAKE_NEXT, WAITING_UNLOCKED } from './work-queue-sql.ts';

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
  /** A session's lock was taken afresh (`fence`): cached state of it may be stale (read it again; must not throw). */
  onClaim?: (key: string, fence: Fence) => Promise<void>;
  /** How long delivery ids are remembered for the dedupe of redeliveries (default 48 h). */
  dedupeWindowMs?: number;
  /** How long finished messages (and their results, for waiters) are kept (default 24 h). */
  doneRetentionMs?: number;
  /** How often old rows are deleted (default 10 min). */
  pruneEveryMs?: number;
}

interface InboxRow extends QueueRow { owner: string | null }

/** What the done mark of a session's last job saw: used by the drain to go on without another statement. */
interface AfterDone { seq: number; last: number; nextSeq: number; nextMs: number | undefined; checkedAt: number }

/** A session this replica is running: notifications that came meanwhile (earliest database time, latest local time). */
interface Working { againSince?: number; againAt?: number; yieldSince?: number; checkedAt: number; turn?: ClaimedTurn }

/**
 * The cluster's work queue on PostgreSQL (SPEC §13): intake commits the message with a per-session sequence
 * before the platform is acknowledged; any replica claims a session with queued work by taking its lock and
 * runs its messages in sequence order; a finished message moves the session's `done_seq` through the lock's
 * connection, so a replica that lost the lock cannot mark anything done.
 *
 * Fairness: a replica whose slots are full keeps the sessions it could not claim with the acceptance time of
 * their oldest waiting message ({@link ClaimOrder}); a freed slot goes to the one that waited longest, and a
 * session with more queued work gives its slot up when an older one waits. Statements per turn: the next message
 * is fetched and marked in one statement, the done mark carries the count of replies sent, the notification and
 * the look at the next message; a reply's `sent` mark rides on the next statement of the job.
 */
export class PgWorkQueue implements SharedQueue {
  readonly stats: WorkQueueStats = { takeovers: 0, reruns: 0, duplicateWindows: 0, leaseLosses: 0 };
  private readonly working = new Map<string, Working>();
  private readonly order = new ClaimOrder();
  private readonly afterDone = new Map<string, AfterDone>();
  /** The lock of each session this replica is draining: its jobs run under it (see {@link runExclusive}). */
  private readonly claims = new Map<string, Fence>();
  /** Replies the platform took, by job, not yet written (the job's next statement carries them). */
  private readonly sentCounts = new Map<string, number>();
  /** Sessions with a message accepted here without notifying the others: they are told if the lock is not had here. */
  private readonly unannounced = new Set<string>();
  private readonly waiters: DoneWaiters;
  private run: ((job: QueuedJob) => Promise<TurnResult | undefined>) | undefined;
  /** The queue modes applied to claimed messages (SPEC §16), when the gateway gave its policy. */
  private modes: ClaimedQueueModes | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private scanning = false;
  /** Until the first scan answered, sessions join the claim order but none is claimed (the oldest are not known yet). */
  private scanned = false;
  /** When the last scan began (local time). */
  private scannedAt = 0;
  /** The database's clock minus this process's (ms), from the last statement that returned `now()`. */
  private clockOffset = 0;

  constructor(private readonly options: PgWorkQueueOptions) {
    this.waiters = new DoneWaiters({ pool: options.pool, pollMs: options.pollMs });
    // Waiting on results works from the start (a tool may wait before this replica claims any work).
    options.listener?.on('sb_done', (payload) => {
      const { key, seq, last } = JSON.parse(payload) as { key: string; seq: number; last?: number };
      this.waiters.heard();
      // A job this replica runs settles its waiters itself when its done mark returns (the notice can come first).
      if (this.working.has(key)) return;
      // Under load every replica hears of every message: the ones that did not run it need not try it too.
      this.order.dropForeign(key);
      this.waiters.noticed(key, seq, last);
    });
  }

  async accept(message: InboundMessage, key: string, correlationId: string): Promise<{ accepted: true; seq: number } | { accepted: false }> {
    // The platform's raw update is not stored (as in the local inbox): a deeply nested one made JSON.stringify throw.
    const { raw: _raw, ...stored } = message;
    // The others are told only when this replica will not claim it at once (its slots are full, or older work waits).
    const runsHere = !this.closed && this.run !== undefined && this.scanned && this.order.size === 0 && this.working.size < this.options.maxClaims;
    const { rows } = await this.options.pool.query<{ seq: string; now_ms: number }>(ACCEPT, [storableString(deliveryKey(message)), key, jsonbText(stored), correlationId, !runsHere]);
    const row = rows[0];
    if (row === undefined) return { accepted: false };
    this.clockOffset = row.now_ms - Date.now();
    if (runsHere) this.unannounced.add(key);
    // Most messages run where they arrived: try at once rather than on the notification's round trip.
    const since = row.now_ms;
    setImmediate(() => this.claim(key, since));
    return { accepted: true, seq: Number(row.seq) };
  }

  async markSeen(message: InboundMessage, outcome: SeenOutcome): Promise<boolean> {
    const { rowCount } = await this.options.pool.query('INSERT INTO sb_delivery (delivery_key, outcome) VALUES ($1, $2) ON CONFLICT DO NOTHING', [storableString(deliveryKey(message)), outcome]);
    return rowCount === 1;
  }

  whenDone(key: string, seq: number): Promise<TurnResult | undefined> {
    return this.waiters.wait(key, seq);
  }

  async runExclusive<T>(key: string, work: () => Promise<T>, job?: QueuedJob): Promise<T> {
    if (job) {
      const claim = this.claims.get(key);
      if (!claim || claim.key !== key || !claim.alive) throw new LeaseLostError(key, new Error('the claim of this message lost its session lock; another replica runs it'));
      return runFenced(claim, work);
    }
    const lock = await this.options.locks.acquire(key, this.options.lockWaitMs ?? 120_000);
    if (!lock) throw new LeaseLostError(key, new Error('the session stayed locked by another replica'));
    try {
      if (lock.fresh) await this.options.onClaim?.(key, lock.fence);
      return await runFenced(lock.fence, work);
    } finally {
      await lock.release();
    }
  }

  async runState(key: string): Promise<{ running: boolean; waiting: number }> {
    return (await clusterRunStates(this.options.pool, [key])).get(key) ?? { running: false, waiting: 0 };
  }

  async lockLost(): Promise<boolean> {
    const fence = currentFence();
    if (!fence) return false;
    // A failed statement may be the first sign of a cut connection: ask the connection itself.
    if (fence.alive && (await fence.client.query('SELECT 1').then(() => true, () => false))) return false;
    fence.markLost();
    return true;
  }

  /**
   * Reply `index` is about to be sent: recorded (with the replies sent before it) before the platform sees it, on
   * the job's row and those its turn carried (a rerun of one of them then knows the answer may be out already).
   */
  async sending(job: QueuedJob, index: number): Promise<void> {
    const sent = Math.max(job.sent, this.sentCounts.get(jobId(job)) ?? 0);
    await this.fenced(job.key).query('UPDATE sb_inbox SET sending = $3, sent = greatest(sent, $4) WHERE session_key = $1 AND seq BETWEEN $2 AND $5',
      [job.key, job.seq, index + 1, sent, this.lastCarried(job)]);
  }

  /** The live reply's posted messages, through the claim's lock (a replica that lost it cannot write them). */
  async live(job: QueuedJob, ids: readonly string[]): Promise<void> {
    const claim = this.claims.get(job.key);
    if (!claim?.alive) throw new LeaseLostError(job.key, new Error('the claim of this message lost its session lock; another replica runs it'));
    await claim.client.query('UPDATE sb_inbox SET live = $3 WHERE session_key = $1 AND seq = $2', [job.key, job.seq, JSON.stringify(ids)]);
  }

  /**
   * The platform took the first `count` replies. No statement of its own: the job's next one (the next reply's
   * `sending`, or `done`) writes it. A crash before that leaves `sending > sent`, which the next owner counts as a
   * duplicate window and sends that reply again, as when the crash came between the platform and the record.
   */
  async sent(job: QueuedJob, count: number): Promise<void> {
    const id = jobId(job);
    this.sentCounts.set(id, Math.max(count, this.sentCounts.get(id) ?? 0));
  }

  /** Marks the job (and what its turn carried) done and keeps its result for waiters on any replica; fails once the lock is lost. */
  async done(job: QueuedJob, result: TurnResult | undefined): Promise<void> {
    const client = this.fenced(job.key);
    const last = this.lastCarried(job);
    const id = jobId(job);
    const sent = Math.max(job.sent, this.sentCounts.get(id) ?? 0);
    this.sentCounts.delete(id);
    const checkedAt = Date.now();
    // With no message after it, the mark gives the session's lock back itself (the release then costs no statement).
    const givingBack = this.options.locks.beginGiveBack(job.key);
    let row: { done: number; next_ms: number | null; next_seq: string | null; unlocked: boolean | null } | undefined;
    const notice = JSON.stringify({ key: job.key, seq: job.seq, ...(last > job.seq ? { last } : {}) });
    try {
      row = (await client.query<NonNullable<typeof row>>(DONE,
        [job.key, job.seq, result ? jsonbText(result) : null, sent, notice, givingBack !== undefined, last])).rows[0];
    } finally {
      givingBack?.(row?.unlocked === true);
    }
    if (row?.done !== last - job.seq + 1) this.options.logger.error({ sessionKey: job.key, seq: job.seq, last }, 'a finished message was not the next of its session; left as it is');
    else this.afterDone.set(job.key, { seq: job.seq, last, nextSeq: Number(row.next_seq), nextMs: row.next_ms ?? undefined, checkedAt });
    for (let seq = job.seq; seq <= last; seq++) this.waiters.settle(job.key, seq, result);
  }

  /** The last message the job's turn carries (queue modes collect and steer): its own when none. */
  private lastCarried(job: QueuedJob): number {
    const turn = this.working.get(job.key)?.turn;
    return turn?.seq === job.seq ? turn.last : job.seq;
  }

  /** Starts claiming sessions with queued work; `run` runs one job and settles when it is done. */
  start(run: (job: QueuedJob) => Promise<TurnResult | undefined>, modes?: QueueModePolicy): void {
    this.run = run;
    if (modes) {
      this.modes = new ClaimedQueueModes({
        policy: modes, pool: this.options.pool, logger: this.options.logger, dbNow: () => this.dbNow(), closed: () => this.closed,
        noticedAt: (key) => this.working.get(key)?.againAt, jobOf: (key, row) => jobOf(key, row),
      });
    }
    const { listener } = this.options;
    listener.on('sb_ready', (key) => this.claim(key, this.dbNow(), true));
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
    this.waiters.close();
  }

  /** Tells every replica that `key` has queued work (the poll's scan finds it when this fails too). */
  private announce(key: string): void {
    this.options.pool.query("SELECT pg_notify('sb_ready', $1)", [key]).catch((err: unknown) => this.options.logger.warn({ err, sessionKey: key }, 'could not announce queued work'));
  }

  private dbNow(): number {
    return Date.now() + this.clockOffset;
  }

  private fenced(key: string): pg.Client {
    const client = fencedClient(key);
    if (!client) throw new LeaseLostError(key, new Error('not running under the session lock'));
    return client;
  }

  /**
   * Looks for sessions with queued work nobody is running (the fallback for missed notifications, and how a dead
   * replica's sessions are found): they join the claim order with the acceptance time of their oldest message.
   */
  private async scan(): Promise<void> {
    if (this.scanning || this.closed || !this.run) return;
    this.scanning = true;
    this.scannedAt = Date.now();
    try {
      const { rows } = await this.options.pool.query<{ session_key: string; ready_ms: number; now_ms: number }>(WAITING_UNLOCKED);
      for (const { session_key: key, ready_ms: readyMs, now_ms: nowMs } of rows) {
        this.clockOffset = nowMs - Date.now();
        if (!this.working.has(key)) this.order.add(key, readyMs);
      }
      // Not awaited: a claim runs its session's whole queue; the slots fill side by side.
      this.fill();
    } catch (error) {
      this.options.logger.warn({ err: error }, 'could not look for queued work; trying again');
    } finally {
      this.scanning = false;
      if (!this.scanned) { this.scanned = true; this.fill(); }
    }
  }

  /** `key` has queued work since `since` (database time): it runs when a slot is free and no older session waits. */
  private claim(key: string, since: number, foreign = false): void {
    if (this.closed || !this.run) return;
    const busy = this.working.get(key);
    if (busy) {
      busy.againSince = Math.min(busy.againSince ?? Infinity, since);
      busy.againAt = Date.now();
      if (busy.turn) this.modes?.noticed(busy.turn);
      return;
    }
    this.order.add(key, since, foreign);
    this.fill();
  }

  /** Gives free slots to the sessions that waited longest. */
  private fill(): void {
    while (!this.closed && this.run && this.scanned && this.working.size < this.options.maxClaims) {
      const key = this.order.takeOldest();
      if (key === undefined) return;
      if (!this.working.has(key)) void this.claimNow(key);
    }
  }

  /** Takes a session's lock if free and runs its queued messages in order. */
  private async claimNow(key: string): Promise<void> {
    const state: Working = { checkedAt: 0 };
    this.working.set(key, state);
    let lock;
    try {
      state.checkedAt = Date.now();
      lock = await this.options.locks.tryAcquire(key, { sql: CLAIM_NEXT, params: [key, this.options.replicaId] });
    } catch (error) {
      this.working.delete(key);
      if (this.unannounced.delete(key)) this.announce(key);
      this.options.logger.warn({ err: error, sessionKey: key }, 'could not try the lock of a session');
      this.fill();
      return;
    }
    if (!lock) {
      this.working.delete(key);
      // Held elsewhere (running there): that replica must hear of the message.
      if (this.unannounced.delete(key)) this.announce(key);
      this.fill();
      return;
    }
    this.unannounced.delete(key);
    this.claims.set(key, lock.fence);
    let lost: boolean;
    let wasFull: boolean;
    try {
      if (lock.fresh) await this.options.onClaim?.(key, lock.fence);
      const first = lock.rows?.[0] as (InboxRow & { pending: boolean | null }) | undefined;
      lost = await runFenced(lock.fence, () => this.drain(key, lock.fence, state, first));
    } catch (error) {
      lost = !lock.fence.alive || error instanceof LeaseLostError;
      if (!lost) this.options.logger.error({ err: error, sessionKey: key }, 'running the queued messages of a session failed');
    } finally {
      this.afterDone.delete(key);
      this.claims.delete(key);
      await lock.release();
      wasFull = this.working.size >= this.options.maxClaims;
      this.working.delete(key);
    }
    // A lost lock was counted when its connection ended (SessionLocks' onLost).
    if (!lost) {
      // A session with more work that gave its slot to an older one waits in the order with its next message's time.
      if (state.yieldSince !== undefined) this.order.add(key, state.yieldSince);
      // A message accepted after the drain's last look at the queue found the session busy: look again.
      if (state.againAt !== undefined && state.againAt >= state.checkedAt) this.order.add(key, state.againSince ?? this.dbNow());
      // A slot of a full replica is free and nothing is known to wait: a session turned away meanwhile (a
      // notification that never came) takes it now rather than at the next poll; at most one such look per quarter
      // poll (a busy replica frees a slot at nearly every turn: a statement each was 0.6 statements per turn).
      else if (wasFull && this.order.size === 0 && Date.now() - this.scannedAt >= this.options.pollMs / 4) setImmediate(() => void this.scan());
    }
    this.fill();
  }

  /** Runs the session's pending messages in sequence order (`claimed`: what the lock statement took); true when the lock was lost on the way. */
  private async drain(key: string, fence: Fence, state: Working, claimed: (InboxRow & { pending: boolean | null }) | undefined): Promise<boolean> {
    const client = fence.client;
    // The lock statement took the first message already, unless it found none while some was pending (the previous
    // holder finished one between its snapshot and the lock), or ran none (a lock taken again or shared).
    let row: InboxRow | undefined = claimed?.seq != null ? claimed : undefined;
    if (!row && (claimed === undefined || claimed.pending === true)) {
      state.checkedAt = Date.now();
      row = (await client.query<InboxRow>(TAKE_NEXT, [key, this.options.replicaId])).rows[0];
    }
    while (row) {
      if (row.attempts > 0) {
        this.stats.reruns++;
        if (row.owner !== this.options.replicaId) this.stats.takeovers++;
        if (row.sending > row.sent) this.stats.duplicateWindows++;
      }
      const job = jobOf(key, row);
      try {
        state.turn = this.modes ? await this.modes.begin(job, row, fence) : undefined;
        await this.run!(job);
      } finally {
        state.turn = undefined;
      }
      if (!fence.alive) return true;
      if (this.closed) return false;
      const after = this.afterDone.get(key);
      this.afterDone.delete(key);
      // Not marked done (its mark failed): left to the next claim or poll, as the lock is given back.
      if (after?.seq !== job.seq) return false;
      state.checkedAt = after.checkedAt;
      if (after.nextSeq <= after.last) return false;
      // An older session waits for a slot: this one goes back in line with its next message's time.
      const since = after.nextMs ?? this.dbNow();
      if (this.working.size >= this.options.maxClaims && this.order.hasOlderThan(since)) {
        state.yieldSince = since;
        return false;
      }
      state.checkedAt = Date.now();
      row = (await client.query<InboxRow>(TAKE_NEXT, [key, this.options.replicaId])).rows[0];
    }
    return false;
  }
}

/** A queued row as a job of this replica. */
function jobOf(key: string, row: QueueRow): QueuedJob {
  return {
    message: row.message, key, correlationId: row.correlation_id, seq: Number(row.seq),
    replayed: row.attempts > 0, sent: row.sent, ...(row.live?.length ? { live: row.live } : {}),
  };
}

function jobId(job: QueuedJob): string {
  return `${job.key}\u0000${job.seq}`;
}
