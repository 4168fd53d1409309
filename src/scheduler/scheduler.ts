import { randomUUID } from 'node:crypto';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { DeliverToConfig } from '../config/scheduler.ts';
import type { InboundSink } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import type { DeadlineTimers } from '../core/deadline.ts';
import { BadRequestError, NotFoundError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { DeliveryTarget, InboundMessage } from '../core/message.ts';
import { buildSessionKey, parseSessionKey } from '../routing/session-key.ts';
import type { Job, JobInput, JobOutcome, JobsService, JobState, JobStore, JobView } from './jobs.ts';
import { parseSchedule, type Schedule } from './schedule.ts';

/** Options of {@link Scheduler}. */
export interface SchedulerOptions {
  config: ResolvedConfig;
  store: JobStore;
  clock: Clock;
  logger: Logger;
  /** The gateway's intake (late-bound: the gateway is made after the scheduler's users). */
  sink: () => InboundSink;
  /** Whether a channel account can take replies now (its adapter exists). */
  canDeliver: (channel: string, accountId: string) => boolean;
  /** Timers of due times (tests fire them themselves). */
  timers?: DeadlineTimers;
  /** Queues a heartbeat now (`POST /hooks/wake`); absent: no heartbeat is configured. */
  wake?: () => Promise<void>;
}

const realTimers: DeadlineTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** The longest a timer is set for: Node's limit is 2^31-1 ms; a later due time is reached by setting it again. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** How soon a job whose look failed is looked at again. */
const RETRY_MS = 10_000;

/**
 * Runs scheduled jobs (SPEC §17). Each due time of a job runs once: it is submitted to the gateway as an internal
 * message whose id names the job and the due time (`job:<id>:<dueAt>`), which the gateway journals and dedupes
 * like a platform delivery (in cluster mode in the shared queue in PostgreSQL, so replicas racing on it queue it
 * once), then claimed in the job store, which moves the job past it (a conditional update, a row lock in cluster
 * mode). After downtime a missed run fires once at start, not once per missed slot.
 */
export class Scheduler implements JobsService {
  private readonly options: SchedulerOptions;
  private readonly timers: DeadlineTimers;
  private readonly schedules = new Map<string, Schedule>();
  private readonly jobs = new Map<string, Job>();
  /**
   * The next due time of each job as the last look at it found it: a pass looks only at the jobs due by now and
   * those in {@link toCheck}, not at every job (a pass with 10,000 jobs read each one's state).
   */
  private readonly nextDueAt = new Map<string, number>();
  /** Jobs to look at in the next pass whatever their due time (added, resumed, or all of them at start). */
  private readonly toCheck = new Set<string>();
  private timer: unknown;
  private timerAt?: number;
  private stopped = true;
  /** Counts of finished runs by outcome, since start (`/metrics`). */
  readonly runCounts: Record<JobOutcome, number> = { delivered: 0, silent: 0, failed: 0, undeliverable: 0, budget: 0 };
  /** The last runs, newest last (`/status`). */
  readonly recentRuns: { jobId: string; at: string; outcome: JobOutcome }[] = [];
  private ticking: Promise<void> = Promise.resolve();

  constructor(options: SchedulerOptions) {
    this.options = options;
    this.timers = options.timers ?? realTimers;
  }

  /** Loads the jobs (config and stored), fires what was missed while the gateway was down, and sets the timer. */
  async start(): Promise<void> {
    const now = this.options.clock.now();
    for (const config of this.options.config.jobs) {
      this.addJob({ ...config, source: 'config', createdAt: now });
      const refusal = this.refusalOf(config.deliverTo);
      if (refusal) this.options.logger.warn({ jobId: config.id }, `job ${config.id}: ${refusal} Its answers may not reach anyone.`);
    }
    for (const job of await this.options.store.listJobs()) {
      if (this.jobs.has(job.id)) {
        this.options.logger.warn({ jobId: job.id }, 'a job made at run time has the id of a config job; the config job is kept');
        continue;
      }
      try {
        this.addJob(job);
      } catch (error) {
        this.options.logger.warn({ err: error, jobId: job.id }, 'a stored job has a schedule that is no longer valid; it is skipped');
      }
    }
    for (const id of this.jobs.keys()) this.toCheck.add(id);
    this.stopped = false;
    await this.tick();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Settles once the current pass over due jobs is done (tests). */
  idle(): Promise<void> {
    return this.ticking;
  }

  async list(): Promise<JobView[]> {
    const now = this.options.clock.now();
    const views: JobView[] = [];
    for (const job of this.jobs.values()) views.push(await this.viewOf(job, now));
    return views;
  }

  async add(input: JobInput, createdBy: string): Promise<JobView> {
    const id = input.id ?? `job-${randomUUID().slice(0, 8)}`;
    if (this.jobs.has(id)) throw new BadRequestError(`A job "${id}" exists already; remove it first or choose another id.`, 'job_exists');
    const agentId = input.agentId ?? this.options.config.agents[0]?.id ?? 'main';
    if (!this.options.config.agents.some((a) => a.id === agentId)) throw new BadRequestError(`No agent "${agentId}" is configured.`, 'unknown_agent');
    const deliverTo = { ...input.deliverTo, accountId: input.deliverTo.accountId ?? 'default' };
    if (!this.options.canDeliver(deliverTo.channel, deliverTo.accountId)) {
      throw new BadRequestError(`The job's chat is on ${deliverTo.channel}/${deliverTo.accountId}, which this gateway does not run.`, 'unknown_target');
    }
    if (Boolean(deliverTo.peer) === Boolean(deliverTo.group)) throw new BadRequestError('deliverTo names exactly one of peer and group.', 'invalid_target');
    const refusal = this.refusalOf(deliverTo);
    if (refusal) throw new BadRequestError(refusal, 'target_not_allowed');
    if (input.session && input.session !== 'isolated') parseSessionKey(input.session);
    const job: Job = {
      id, schedule: input.schedule, prompt: input.prompt, agentId, deliverTo, session: input.session ?? 'isolated',
      tokenBudget: input.tokenBudget ?? 50_000, enabled: true, source: 'runtime', createdAt: this.options.clock.now(), createdBy,
      ...(input.timezone ? { timezone: input.timezone } : {}),
    };
    this.addJob(job);
    try {
      await this.options.store.putJob(job);
    } catch (error) {
      this.forget(id);
      throw error;
    }
    this.options.logger.info({ jobId: id, schedule: job.schedule, createdBy }, 'job added');
    await this.tick();
    return this.viewOf(job, this.options.clock.now());
  }

  async remove(id: string): Promise<boolean> {
    const job = this.jobs.get(id);
    if (!job) return false;
    if (job.source === 'config') throw new BadRequestError(`Job "${id}" comes from the config file; remove it there and restart.`, 'config_job');
    this.forget(id);
    await this.options.store.removeJob(id);
    this.options.logger.info({ jobId: id }, 'job removed');
    await this.tick();
    return true;
  }

  async runNow(id: string): Promise<void> {
    const job = this.requireJob(id);
    await this.submit(job, this.options.clock.now(), `job:${id}:now:${randomUUID()}`);
  }

  async setPaused(id: string, paused: boolean): Promise<JobView> {
    const job = this.requireJob(id);
    await this.options.store.setPaused(id, paused);
    this.toCheck.add(id);
    await this.tick();
    return this.viewOf(job, this.options.clock.now());
  }

  async wake(): Promise<boolean> {
    if (!this.options.wake) return false;
    await this.options.wake();
    return true;
  }

  /**
   * Why the gateway may not write to a job's chat, by the account's own policy (a job must not reach people or
   * groups the bot does not talk to): a group outside its allowlist, a DM with DMs off or a peer outside the
   * allowlist. Pairing is not checked here (a paired peer may write; the job then answers where it was asked).
   */
  private refusalOf(deliverTo: DeliverToConfig): string | undefined {
    const channels = this.options.config.channels;
    const accounts: readonly { accountId: string; dmPolicy: string; allowFrom: string[]; groupPolicy: string; groups: string[] }[] =
      deliverTo.channel === 'webchat' ? [] : channels[deliverTo.channel];
    const account = accounts.find((a) => a.accountId === (deliverTo.accountId ?? 'default'));
    if (!account) return undefined;
    const where = `${deliverTo.channel}/${account.accountId}`;
    if (deliverTo.group && account.groupPolicy === 'allowlist' && !account.groups.includes(deliverTo.group)) {
      return `Group ${deliverTo.group} is not in the allowlist of ${where} (its groups setting): the bot does not write there.`;
    }
    if (deliverTo.peer && account.dmPolicy === 'disabled') return `Direct messages are off on ${where} (dmPolicy "disabled").`;
    if (deliverTo.peer && account.dmPolicy === 'allowlist' && !account.allowFrom.includes(deliverTo.peer)) {
      return `${deliverTo.peer} is not in the allowFrom list of ${where}: the bot does not write to them.`;
    }
    return undefined;
  }

  private requireJob(id: string): Job {
    const job = this.jobs.get(id);
    if (!job) throw new NotFoundError(`No job "${id}".`);
    return job;
  }

  private addJob(job: Job): void {
    const schedule = parseSchedule(job.schedule, { ...(job.timezone ? { timezone: job.timezone } : {}), minIntervalSeconds: this.options.config.scheduler.minIntervalSeconds });
    this.jobs.set(job.id, job);
    this.schedules.set(job.id, schedule);
    this.toCheck.add(job.id);
  }

  private forget(id: string): void {
    this.jobs.delete(id);
    this.schedules.delete(id);
    this.nextDueAt.delete(id);
    this.toCheck.delete(id);
  }

  private async viewOf(job: Job, now: number): Promise<JobView> {
    const state = await this.options.store.stateOf(job.id, now);
    const next = job.enabled && !state.paused ? this.nextDue(job, state, now) : undefined;
    return { job, state, ...(next !== undefined ? { nextRunAt: next } : {}) };
  }

  /** The next due time of a job after `now` (or a one-off that never ran and is past: now). */
  private nextDue(job: Job, state: JobState, now: number): number | undefined {
    const schedule = this.schedules.get(job.id);
    if (!schedule) return undefined;
    const after = Math.max(state.lastDueAt ?? -Infinity, schedule.kind === 'once' ? -Infinity : state.since);
    const missed = schedule.latestDue(Number.isFinite(after) ? after : -1, now);
    if (missed !== undefined) return missed;
    return schedule.next(Math.max(now, Number.isFinite(after) ? after : now));
  }

  /** Fires every job whose due time has come (once each), then sets the timer for the next one. Passes never overlap. */
  private tick(): Promise<void> {
    this.ticking = this.ticking.then(() => this.pass()).catch((err: unknown) => this.options.logger.error({ err }, 'the scheduler pass failed; it runs again at the next due time'));
    return this.ticking;
  }

  private async pass(): Promise<void> {
    if (this.stopped) return;
    const now = this.options.clock.now();
    const looked = new Set(this.toCheck);
    this.toCheck.clear();
    for (const [id, at] of this.nextDueAt) if (at <= now) looked.add(id);
    let failed = false;
    for (const id of looked) {
      this.nextDueAt.delete(id);
      try {
        const next = await this.look(id, now);
        if (next !== undefined) this.nextDueAt.set(id, next);
      } catch (error) {
        // Looked at again shortly (a store that failed once, a gateway that refused): the job is not dropped.
        this.options.logger.error({ err: error, jobId: id }, 'a due job could not be run; it is looked at again in 10 s');
        this.toCheck.add(id);
        failed = true;
      }
    }
    let earliest: number | undefined = failed ? now + RETRY_MS : undefined;
    for (const at of this.nextDueAt.values()) if (earliest === undefined || at < earliest) earliest = at;
    this.arm(earliest, now);
  }

  /** Fires a job if one of its due times has come (once); returns its next due time. */
  private async look(id: string, now: number): Promise<number | undefined> {
    const job = this.jobs.get(id);
    const schedule = this.schedules.get(id);
    if (!job?.enabled || !schedule) return undefined;
    const state = await this.options.store.stateOf(job.id, now);
    // A paused job is looked at again at its next due time (another replica may resume it meanwhile).
    if (state.paused) return schedule.next(now);
    const since = schedule.kind === 'once' ? (state.lastDueAt ?? -1) : Math.max(state.lastDueAt ?? -Infinity, state.since);
    const due = schedule.latestDue(since, now);
    if (due !== undefined) {
      if (due < now - 60_000) this.options.logger.info({ jobId: job.id, dueAt: new Date(due).toISOString() }, 'a run missed while the gateway was down fires now (once)');
      // Submitted before it is claimed: the gateway journals the run under an id of the job and the due time and
      // takes a second submit of it as a duplicate, so a crash between the two (or a replica racing this one)
      // neither loses the run nor runs it twice; the claim then moves the job past this due time.
      await this.submit(job, due, `job:${job.id}:${due}`);
      await this.options.store.claim(job.id, due);
    }
    return schedule.next(Math.max(now, due ?? now));
  }

  private arm(at: number | undefined, now: number): void {
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = at;
    if (at === undefined || this.stopped) return;
    this.timer = this.timers.setTimeout(() => { this.timer = undefined; void this.tick(); }, Math.min(MAX_TIMER_MS, Math.max(0, at - now)));
    (this.timer as { unref?: () => void })?.unref?.();
  }

  /** The next time the scheduler wakes (epoch ms), for `/status`. */
  get nextWakeAt(): number | undefined {
    return this.timerAt;
  }

  /** Submits one run; its outcome is recorded when the turn ends (in the background). */
  private async submit(job: Job, dueAt: number, id: string): Promise<void> {
    const logger = this.options.logger.child({ jobId: job.id });
    const target = targetOf(job.deliverTo);
    if (!this.options.canDeliver(target.channel, target.accountId)) {
      logger.warn({ channel: target.channel, accountId: target.accountId }, 'the job\'s chat is on a channel this gateway does not run; the run is skipped and the job kept');
      await this.record(job.id, 'undeliverable', `no channel ${target.channel}/${target.accountId}`);
      return;
    }
    const sessionKey = this.sessionKeyOf(job);
    const message: InboundMessage = {
      id, channel: 'internal', accountId: 'default', chatType: 'direct', chatId: sessionKey, peerId: `job:${job.id}`,
      sender: { id: `job:${job.id}`, name: 'job' }, text: job.prompt, attachments: [], mentionsBot: true, receivedAt: this.options.clock.now(),
      internal: { kind: 'job', sessionKey, deliverTo: target, jobId: job.id, runTokenBudget: job.tokenBudget },
    };
    const submission = await this.options.sink()(message);
    if (submission.status === 'duplicate') {
      logger.info({ dueAt: new Date(dueAt).toISOString() }, 'this due time of the job was already queued (a replay or another replica); not run again');
      return;
    }
    if (submission.status !== 'accepted') {
      await this.record(job.id, 'failed', `refused: ${submission.status}`);
      return;
    }
    logger.info({ dueAt: new Date(dueAt).toISOString(), sessionKey }, 'job run queued');
    void submission.done.then(async (result) => {
      const replied = result?.outcome === 'replied' && result.replies.some((r) => r.text.trim());
      const outcome: JobOutcome = !result || result.outcome === 'failed' ? 'failed' : replied ? 'delivered' : 'silent';
      await this.record(job.id, outcome);
    }).catch((err: unknown) => logger.warn({ err }, 'could not record a job run'));
  }

  private async record(jobId: string, outcome: JobOutcome, error?: string): Promise<void> {
    const at = this.options.clock.now();
    this.runCounts[outcome]++;
    this.recentRuns.push({ jobId, at: new Date(at).toISOString(), outcome });
    if (this.recentRuns.length > 20) this.recentRuns.shift();
    await this.options.store.recordRun(jobId, { outcome, at, ...(error ? { error } : {}) });
  }

  private sessionKeyOf(job: Job): string {
    if (job.session && job.session !== 'isolated') return parseSessionKey(job.session).key;
    const s = this.options.config.session;
    return buildSessionKey({ agentId: job.agentId ?? this.options.config.agents[0]?.id ?? 'main', channel: 'internal', accountId: 'default', chatType: 'direct', jobId: job.id },
      { dmScope: s.dmScope, threads: s.threads, identityLinks: s.identityLinks });
  }
}

/** Where a job's answer goes, as the channels take it. */
export function targetOf(deliverTo: DeliverToConfig): DeliveryTarget {
  const accountId = deliverTo.accountId ?? 'default';
  if (deliverTo.peer) return { channel: deliverTo.channel, accountId, chatId: deliverTo.peer, chatType: 'direct', peerId: deliverTo.peer, ...(deliverTo.threadId ? { threadId: deliverTo.threadId } : {}) };
  return {
    channel: deliverTo.channel, accountId, chatId: deliverTo.group ?? '', chatType: deliverTo.channel === 'telegram' ? 'group' : 'channel',
    ...(deliverTo.threadId ? { threadId: deliverTo.threadId } : {}),
  };
}
