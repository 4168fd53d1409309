import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { TurnResult } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import type { InternalRoute } from '../core/message.ts';
import type { Submission } from '../core/channel-adapter.ts';
import { goalPrompt } from '../agent/runs.ts';
import { RESUME_STAGGER_MS, wasInterrupted } from '../gateway/resume.ts';
import type { QueuedJob, SharedQueue } from '../gateway/shared-queue.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import { allSessions } from '../sessions/scan.ts';
import type { SessionStore } from '../sessions/store.ts';

/** Message ids of cluster resumes start with this; the rest is the fingerprint of the run state they resume. */
export const CLUSTER_RESUME_PREFIX = 'resume:';

/**
 * The id of the `background_auto_resume` that resumes `entry`'s run as it stands now: a hash of its session id,
 * run state, last activity and checkpoint (batch, iteration, last entry, correlation id). Replicas that find the
 * same interrupted run compute the same id, so the shared queue accepts it once (its delivery dedupe); any turn
 * of the session that runs meanwhile changes the state, and a resume queued for the old state is skipped.
 */
export function resumeIdOf(entry: SessionEntry): string {
  const state = JSON.stringify([entry.sessionId, entry.runState, entry.updatedAt, entry.goal ?? null, entry.checkpoint ?? null]);
  return `${CLUSTER_RESUME_PREFIX}${createHash('sha256').update(state).digest('base64url').slice(0, 32)}`;
}

/**
 * For each of `keys`: whether messages are queued for it (waiting or running: a running message is not done until
 * its turn ends), and whether a replica holds its lock (an HTTP turn holds the lock without a queued message). An
 * advisory lock on a bigint shows in pg_locks as its two 32-bit halves (as the work queue's scan reads it).
 */
const ACTIVITY = `
WITH held AS (
  SELECT (classid::bigint << 32) | objid::bigint AS h FROM pg_locks
  WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT k AS session_key,
  EXISTS (SELECT 1 FROM sb_lane l WHERE l.session_key = k AND l.next_seq > l.done_seq) AS pending,
  hashtextextended(k, 0) IN (SELECT h FROM held) AS locked
FROM unnest($1::text[]) AS k`;

/** What a replica may be doing with a session: messages queued for it, its lock held. */
export interface SessionActivity {
  pending: boolean;
  locked: boolean;
}

/** {@link SessionActivity} of each of `keys`. */
export async function sessionActivity(pool: Pick<pg.Pool, 'query'>, keys: readonly string[]): Promise<Map<string, SessionActivity>> {
  if (!keys.length) return new Map();
  const { rows } = await pool.query<{ session_key: string; pending: boolean; locked: boolean }>(ACTIVITY, [keys]);
  return new Map(rows.map((r) => [r.session_key, { pending: r.pending, locked: r.locked }]));
}

/** Of `keys`, the sessions no replica works on: nothing queued for them and nobody holding their lock. */
export async function orphanedSessions(pool: Pick<pg.Pool, 'query'>, keys: readonly string[]): Promise<Set<string>> {
  const activity = await sessionActivity(pool, keys);
  return new Set([...activity].filter(([, a]) => !a.pending && !a.locked).map(([k]) => k));
}

/** What {@link ClusterResumes} needs of the gateway. */
export interface ResumeGateway {
  submitInternal(route: InternalRoute, text: string, id: string | undefined, logger?: Logger): Promise<Submission | undefined>;
}

/** Options of {@link ClusterResumes}. */
export interface ClusterResumesOptions {
  pool: pg.Pool;
  store: SessionStore;
  queue: Pick<SharedQueue, 'done'>;
  gateway: ResumeGateway;
  logger: Logger;
  /** `backgroundExecution.enabled && autoResumeOnStartup`: goal runs are resumed (else only stale runs are settled). */
  resume: boolean;
  /** Ends a run left `running` that nothing resumes (on the session's lane, under its lock). */
  settle(key: string): Promise<void>;
  /** How often the live replicas are looked at (a replica that left may have left runs behind). */
  watchMs: number;
  /** A run found under a lock (maybe a dying turn's) is looked at again after this long, doubling, up to 8 times (default 2 s). */
  recheckMs?: number;
  /** A replica is live while its `seen_at` is this recent (three heartbeats of the replica registry). */
  liveWindowMs?: number;
  staggerMs?: number;
}

/** What one scan found and did. */
export interface ResumeScan {
  /** Resumes queued (a resume another replica queued first is not counted). */
  queued: number;
  /** Stale `running` runs handed to `settle`. */
  settled: number;
}

/**
 * Goal runs interrupted by a crash or a stop, resumed in cluster mode (SPEC §11, §13) by whichever replica claims
 * the session, never twice. A scan (at start, and whenever a replica leaves the cluster) looks for entries left
 * `running` or `continuing` toward a goal that no replica is working on (nothing queued, no lock held) and queues a
 * `background_auto_resume` with {@link resumeIdOf} as its id through the shared queue: replicas scanning together
 * queue it once. When the resume's turn comes, {@link guard} runs it only if the run is still in the state it was
 * queued for; a batch that ran in between (a taken-over message, a user's message) carried the run on, so the
 * resume is marked done without a turn.
 */
export class ClusterResumes {
  private timer: NodeJS.Timeout | undefined;
  private readonly timers = new Set<NodeJS.Timeout>();
  private live: Set<string> | undefined;
  private scanning: Promise<ResumeScan> | undefined;
  private rescan = false;
  private rechecks = 0;
  private closed = false;
  private started = false;

  constructor(private readonly options: ClusterResumesOptions) {}

  /** Scans now, then watches the replicas: when one leaves, scans again. */
  start(): void {
    this.started = true;
    void this.scan();
    // The replicas live now, so that one leaving before the first tick is seen leaving.
    void this.watch();
    const watch = () => {
      void this.watch().finally(() => {
        if (!this.closed) this.timer = setTimeout(watch, this.options.watchMs).unref();
      });
    };
    this.timer = setTimeout(watch, this.options.watchMs).unref();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  /** Wraps the queue's runner: a cluster resume whose run moved on since it was queued is done without a turn. */
  guard(run: (job: QueuedJob) => Promise<TurnResult | undefined>): (job: QueuedJob) => Promise<TurnResult | undefined> {
    return async (job) => {
      const { message } = job;
      if (message.internal?.kind !== 'background_auto_resume' || !message.id.startsWith(CLUSTER_RESUME_PREFIX)) return run(job);
      // The session's earlier messages are done (the queue runs them in order under its lock): the store is current.
      const entry = await this.options.store.get(job.key);
      if (entry && wasInterrupted(entry) && resumeIdOf(entry) === message.id) return run(job);
      this.options.logger.info({ sessionKey: job.key, runState: entry?.runState, seq: job.seq }, 'resume skipped: the run moved on since it was queued (another batch carried it)');
      await this.options.queue.done(job, undefined);
      return undefined;
    };
  }

  /** Looks for interrupted runs nobody works on; concurrent calls share one scan (and ask for one more after it). */
  scan(): Promise<ResumeScan> {
    if (this.scanning) {
      this.rescan = true;
      return this.scanning;
    }
    this.scanning = this.scanOnce()
      .catch((err: unknown) => {
        this.options.logger.error({ err }, 'could not look for interrupted background runs');
        return { queued: 0, settled: 0 };
      })
      .finally(() => {
        this.scanning = undefined;
        if (this.rescan && !this.closed) {
          this.rescan = false;
          void this.scan();
        }
      });
    return this.scanning;
  }

  private async scanOnce(): Promise<ResumeScan> {
    const found: SessionEntry[] = [];
    const stale: SessionEntry[] = [];
    for await (const entry of allSessions(this.options.store)) {
      if (this.options.resume && wasInterrupted(entry)) found.push(entry);
      else if (entry.runState === 'running') stale.push(entry);
    }
    if (!found.length && !stale.length) return { queued: 0, settled: 0 };
    const activity = await sessionActivity(this.options.pool, [...found, ...stale].map((e) => e.key));
    const orphaned = new Set([...activity].filter(([, a]) => !a.pending && !a.locked).map(([k]) => k));
    this.recheckLocked([...activity.values()].some((a) => a.locked && !a.pending));
    const toSettle = stale.filter((e) => orphaned.has(e.key));
    for (const { key } of toSettle) {
      void this.options.settle(key).catch((err: unknown) => this.options.logger.warn({ err, sessionKey: key }, 'could not settle a run left running'));
    }
    const toResume = found.filter((e) => orphaned.has(e.key));
    let queued = 0;
    let delay = 0;
    const submitted: Promise<void>[] = [];
    for (const entry of toResume) {
      submitted.push(new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          this.timers.delete(t);
          if (this.closed) return resolve();
          void this.submit(entry).then((ok) => { if (ok) queued++; }, () => undefined).finally(resolve);
        }, delay);
        t.unref();
        this.timers.add(t);
      }));
      delay += this.options.staggerMs ?? RESUME_STAGGER_MS;
    }
    await Promise.all(submitted);
    if (toResume.length || toSettle.length) this.options.logger.info({ found: toResume.length, queued, settled: toSettle.length }, 'resuming background runs interrupted on a replica that stopped or crashed');
    return { queued, settled: toSettle.length };
  }

  private async submit(entry: SessionEntry): Promise<boolean> {
    const route: InternalRoute = { kind: 'background_auto_resume', sessionKey: entry.key, deliverTo: entry.goalTarget ?? entry.deliveryTarget };
    try {
      const submission = await this.options.gateway.submitInternal(route, goalPrompt('background_auto_resume'), resumeIdOf(entry));
      return submission?.status === 'accepted';
    } catch (err) {
      this.options.logger.error({ err, sessionKey: entry.key }, 'could not resume a background run');
      return false;
    }
  }

  /**
   * A lock with nothing queued is an HTTP turn, or a stopping replica's turn whose entry is not written yet: look
   * again later, backing off (recheckMs doubling, at most 30 s apart, up to 8 times), so a slow stop on a loaded
   * machine is still seen once its lock is gone.
   */
  private recheckLocked(locked: boolean): void {
    if (!locked) { this.rechecks = 0; return; }
    if (this.closed || this.rechecks >= 8) return;
    const delay = Math.min(30_000, (this.options.recheckMs ?? 2000) * 2 ** this.rechecks);
    this.rechecks++;
    const t = setTimeout(() => { this.timers.delete(t); void this.scan(); }, delay);
    t.unref();
    this.timers.add(t);
  }

  /** Another replica said it stopped (it may have joined after the last look at the live ones): scan. */
  replicaLeft(replicaId: string): void {
    // Before start, the start's own scan finds what it left.
    if (this.closed || !this.started) return;
    this.live?.delete(replicaId);
    this.options.logger.info({ replicas: [replicaId] }, 'a replica left the cluster: looking for background runs it left behind');
    void this.scan();
  }

  /** A replica that was live and is not any more may have left runs behind: scan. */
  private async watch(): Promise<void> {
    try {
      const { rows } = await this.options.pool.query<{ replica_id: string }>(
        'SELECT replica_id FROM sb_replica WHERE seen_at > now() - make_interval(secs => $1)', [(this.options.liveWindowMs ?? 15_000) / 1000],
      );
      const now = new Set(rows.map((r) => r.replica_id));
      const left = this.live ? [...this.live].filter((id) => !now.has(id)) : [];
      this.live = now;
      if (left.length) {
        this.options.logger.info({ replicas: left }, 'replicas left the cluster: looking for background runs they left behind');
        await this.scan();
      }
    } catch (err) {
      this.options.logger.warn({ err }, 'could not look at the live replicas');
    }
  }
}
