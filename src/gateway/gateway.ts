import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { isQuietHeartbeat } from '../scheduler/heartbeat.ts';
import { zeroUsage } from '../agent/turn-events.ts';
import { warmTokenCounts } from '../tokens/tokens.ts';
import type { ChannelAdapter, InboundSink, Submission, SubmitOptions, TurnResult } from '../core/channel-adapter.ts';
import { ChosenModelError, isAbortError, LeaseLostError, SessionKeyError, ShuttingDownError, SwitchboardError, TurnAbortedError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage, OutboundFile, OutboundMessage } from '../core/message.ts';
import { agentOf } from '../routing/bindings.ts';
import { buildSessionKey, parseSessionKey } from '../routing/session-key.ts';
import { Admission } from './admission.ts';
import type { GatewayOptions, GatewayStats } from './gateway-options.ts';
import { GroupContextBuffer } from './group-context.ts';
import { Outbound } from './outbound.ts';
import type { DeliveryFailure } from '../core/delivery-retry.ts';
import { acknowledgeTurn } from './ack-reaction.ts';
import type { QueueModePolicy, QueuedJob } from './shared-queue.ts';
import type { PendingMessage } from './inbox.ts';
import { LaneScheduler } from './lanes.ts';
import { jobJoins, joinsQueueMode, QueueModes, realQueueTimers, turnJoins, type TurnPlan } from './queue-mode.ts';
import { INTERRUPT_REASON, isInterrupt } from '../agent/turn-joins.ts';
import { LiveTurns, type LiveTurn } from './live-turn.ts';
import { BackgroundRuns } from './background-runs.ts';
import { internalMessage } from '../core/internal-message.ts';
import type { InternalRoute } from '../core/message.ts';
import { goalPrompt, isBackgroundKind } from '../agent/runs.ts';
import { answerOf } from '../tools/session-tools.ts';
import { TIMED_OUT, withDeadline } from '../core/deadline.ts';

/** Channels whose messages are journaled for replay (platform deliveries and internal work, with no caller waiting). */
const DURABLE_CHANNELS = new Set(['telegram', 'discord', 'slack', 'internal']);

/** A message run again after a stop: replies the platform has, messages its live reply posted. */
type Replay = { replayed: true; sent: number; live?: string[] };

/** Both receivers of a turn's text deltas (the web chat's stream, a live reply). */
function bothDeltas(a?: (text: string) => void, b?: (text: string) => void): ((text: string) => void) | undefined {
  return a && b ? (text) => { a(text); b(text); } : a ?? b;
}

/** What the gateway keeps about a message on its way through the queue modes. */
type LaneMeta = { correlationId: string; options: SubmitOptions; logger: Logger; durable: boolean; doneMarked?: boolean };

/** Texts from this length on have their token counts warmed before their turn. */
const WARM_FROM_CHARS = 256;

/**
 * Between channels and the runtime: dedupe → DM/group policy → session key → the key's lane. Every
 * message is either answered, answered with an apology, or (on shutdown) left in the journal for the
 * next start; none is dropped.
 */
export class Gateway {
  readonly lanes: LaneScheduler;
  /** Background batches of goal runs (their own concurrency limit). */
  readonly background: BackgroundRuns;
  readonly stats: GatewayStats = { accepted: 0, duplicates: 0, blocked: 0, skipped: 0, failed: 0, rateLimited: 0 };
  private readonly options: GatewayOptions;
  private readonly outbound: Outbound;
  private readonly groupContext: GroupContextBuffer;
  private readonly admission: Admission;
  /** Replies shown while they are written (SPEC §16). */
  private readonly live: LiveTurns;
  /** Queue modes (SPEC §16): followup, collect, steer, interrupt, in front of the lanes. */
  private readonly queueModes: QueueModes<LaneMeta>;
  /** The agents' models, whose encodings long texts are warmed for. */
  private readonly models: string[];
  private closing = false;

  constructor(options: GatewayOptions) {
    this.options = options;
    this.outbound = new Outbound({ inbox: options.inbox, queue: options.queue, typingIntervalMs: options.typingIntervalMs, typingTimers: options.typingTimers, now: () => options.clock.now() });
    this.lanes = new LaneScheduler({ maxConcurrent: options.config.agentDefaults.maxConcurrent });
    this.background = new BackgroundRuns(options.config.backgroundExecution.maxConcurrentBackgroundTurns);
    this.groupContext = new GroupContextBuffer({ limit: options.config.session.groupContextLimit });
    this.queueModes = new QueueModes({
      config: options.config.messages.queue, timers: options.queueTimers ?? realQueueTimers, logger: options.logger,
      interrupt: (key) => this.lanes.stop(key, INTERRUPT_REASON),
    });
    this.models = [...new Set(options.config.agents.map((a) => a.model))];
    this.live = new LiveTurns({ config: options.config, clock: options.clock, timers: options.liveTimers, events: options.runtime.events, logger: options.logger });
    this.admission = new Admission({
      options, stats: this.stats, outbound: this.outbound, groupContext: this.groupContext, sessionKeyOf: (message) => this.sessionKeyOf(message),
      runImmediate: (message, key, correlationId, logger) => this.runImmediate(message, key, correlationId, logger),
      enqueue: (message, key, correlationId, submitOptions, logger, durable) => this.enqueue(message, key, correlationId, submitOptions, logger, durable),
    });
    options.runtime.attachLanes({
      stop: (key) => { const stopped = this.lanes.stop(key); options.onStop?.(key); return stopped; },
      depth: (key) => this.lanes.depth(key),
      isRunning: (key) => this.lanes.isRunning(key),
      ...(options.queue ? { anywhere: (key: string) => options.queue!.runState(key) } : {}),
    });
  }

  /** The sink handed to every channel. */
  readonly sink: InboundSink = (message, options) => this.submit(message, options);

  /** Registers a channel adapter so replies and typing can reach it. */
  addAdapter(adapter: ChannelAdapter): void {
    this.outbound.add(adapter);
  }

  adapterFor(channel: string, accountId: string): ChannelAdapter | undefined {
    return this.outbound.adapterFor(channel, accountId);
  }

  /** Replies given up on since start (SPEC §16): counts by `channel/account` and the latest ones. */
  deliveryFailures(): { byChannel: Record<string, number>; recent: DeliveryFailure[] } {
    return { byChannel: Object.fromEntries(this.outbound.failedByChannel), recent: [...this.outbound.recentFailures] };
  }

  /** The session key of a message (SPEC §2). */
  sessionKeyOf(message: InboundMessage): string {
    // Internal messages name their session (a spawned child, the caller of a tool, a goal's own session).
    if (message.channel === 'internal') {
      if (!message.internal?.sessionKey) throw new SessionKeyError('An internal message must name its session key.');
      return parseSessionKey(message.internal.sessionKey).key;
    }
    const session = this.options.config.session;
    const config = this.options.config;
    // The API names its agent (model); everything else goes by the most specific binding, else the first agent.
    const agentId = message.agentId
      ? this.options.runtime.agentFor(message.agentId).id
      : agentOf(config.bindings, message, config.agents[0]?.id ?? 'main');
    return buildSessionKey(
      {
        agentId, channel: message.channel, accountId: message.accountId, chatType: message.chatType,
        peerId: message.peerId, groupId: message.groupId, threadId: message.threadId, threadKind: message.threadKind,
      },
      { dmScope: message.dmScope ?? session.dmScope, threads: session.threads, identityLinks: session.identityLinks },
    );
  }

  /** Accepts one message: resolves once it is queued (or refused), not when it is answered. */
  async submit(message: InboundMessage, options: SubmitOptions = {}): Promise<Submission> {
    if (this.closing) throw new ShuttingDownError();
    const correlationId = message.correlationId ?? randomUUID();
    const logger = this.options.logger.child({ correlationId, channel: message.channel, accountId: message.accountId });
    const inbox = this.options.inbox;
    const journaled = Boolean(inbox) || Boolean(this.options.queue);
    const durable = journaled && DURABLE_CHANNELS.has(message.channel);
    const deduped = journaled && (durable || Boolean(message.deliveryId));
    if (inbox && deduped && !inbox.claim(message)) return this.admission.duplicate(message, correlationId, logger);
    try {
      return await this.admission.route(message, options, correlationId, logger, durable, deduped);
    } catch (error) {
      if (inbox && deduped) inbox.unclaim(message);
      throw error;
    }
  }

  /** Runs work on a session's lane, in order with its messages (admin reset and compact). */
  runOnLane<T>(key: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    if (this.closing) return Promise.reject(new ShuttingDownError());
    return new Promise<T>((resolve, reject) => {
      this.lanes.enqueue(key, (signal) => this.exclusive(key, () => work(signal)).then(resolve, reject), () => reject(new ShuttingDownError()));
    });
  }

  /** Cluster mode: runs a message this replica claimed from the shared queue, on its lane. */
  runJob(job: QueuedJob): Promise<TurnResult | undefined> {
    const logger = this.options.logger.child({ correlationId: job.correlationId, channel: job.message.channel, accountId: job.message.accountId });
    if (job.replayed) logger.info({ sessionKey: job.key, seq: job.seq }, 'running again a message whose earlier attempt did not finish');
    const replay: Replay | undefined = job.replayed ? { replayed: true, sent: job.sent, ...(job.live?.length ? { live: job.live } : {}) } : undefined;
    return this.enqueue(job.message, job.key, job.correlationId, {}, logger, true, replay, job);
  }

  /** Cluster mode: how the shared queue applies the queue modes to the messages this replica claims (SPEC §16). */
  queueModePolicy(): QueueModePolicy {
    const queue = this.options.config.messages.queue;
    const triggers = this.options.config.session.resetTriggers;
    return {
      modeOf: (message) => (joinsQueueMode(message, triggers) ? this.queueModes.modeOf(message) : undefined),
      debounceMs: queue.debounceMs,
      interrupts: [queue.mode, ...Object.values(queue.byChannel)].includes('interrupt'),
      interrupt: (key) => { this.lanes.stop(key, INTERRUPT_REASON); },
      timers: this.options.queueTimers ?? realQueueTimers,
    };
  }

  /** Cluster mode: the turn holds its session's lock across replicas (a claimed job: its claim's lock, never a new one). */
  private exclusive<T>(key: string, work: () => Promise<T>, job?: QueuedJob): Promise<T> {
    return this.options.queue ? this.options.queue.runExclusive(key, work, job) : work();
  }

  /** Re-queues messages the journal says were accepted but never answered (after a crash or a stop). */
  replay(pending: PendingMessage[]): number {
    for (const { message, correlationId, sent, live } of pending) {
      const logger = this.options.logger.child({ correlationId, channel: message.channel, accountId: message.accountId });
      let key: string;
      try {
        key = this.sessionKeyOf(message);
      } catch {
        continue;
      }
      logger.info({ sessionKey: key }, 'replaying a message accepted before the last stop');
      void this.enqueue(message, key, correlationId, {}, logger, true, { replayed: true, sent: sent ?? 0, ...(live?.length ? { live } : {}) });
    }
    return pending.length;
  }

  /** Stops intake; waits for running turns up to `graceMs`, then aborts them (they stay journaled for replay). */
  async close(graceMs: number): Promise<void> {
    this.closing = true;
    this.queueModes.close();
    this.background.close();
    this.lanes.pause();
    if ((await withDeadline(this.lanes.whenIdle(), graceMs)) === TIMED_OUT) {
      this.lanes.abortAll('shutdown');
      await this.lanes.whenIdle();
    }
    // Queued messages of platform channels stay in the journal and are replayed at the next start.
    this.lanes.cancelQueued();
  }

  get isClosing(): boolean {
    return this.closing;
  }

  private async runImmediate(message: InboundMessage, key: string, correlationId: string, logger: Logger): Promise<TurnResult | undefined> {
    try {
      const result = await this.options.runtime.runImmediate(message, key, correlationId);
      for (const reply of result.replies) await this.outbound.deliver(message, reply, logger);
      return result;
    } catch (error) {
      logger.error({ err: error }, 'command failed');
      return undefined;
    }
  }

  private enqueue(
    message: InboundMessage, key: string, correlationId: string, options: SubmitOptions, logger: Logger, durable: boolean, replay?: Replay, job?: QueuedJob,
  ): Promise<TurnResult | undefined> {
    // Replayed and cluster-claimed messages run each on its own (their transcript entries may exist already).
    const participates = !replay && !job && joinsQueueMode(message, this.options.config.session.resetTriggers);
    return this.queueModes.admit(key, { message, meta: { correlationId, options, logger, durable } }, participates, (primary, begin) => {
      const { meta } = primary;
      const onLane = () => this.enqueueOnLane(primary.message, key, meta.correlationId, meta.options, meta.logger, meta.durable, replay, job, begin);
      return isBackgroundKind(primary.message.internal?.kind) ? this.background.schedule(key, onLane) : onLane();
    });
  }

  /** Messages a turn carried besides its own (collect, steer) are done when it is: their user entries are in its transcript. */
  private async markCarried(plan: TurnPlan<LaneMeta> | undefined, logger: Logger): Promise<void> {
    if (plan?.kind !== 'run') return;
    for (const { message, meta } of plan.carried()) {
      if (!meta.durable || meta.doneMarked) continue;
      meta.doneMarked = true;
      await this.options.inbox?.done(message).catch((err: unknown) => logger.error({ err }, 'could not journal a finished message'));
    }
  }

  private enqueueOnLane(
    message: InboundMessage, key: string, correlationId: string, options: SubmitOptions, logger: Logger, durable: boolean, replay?: Replay, job?: QueuedJob,
    begin?: () => TurnPlan<LaneMeta>,
  ): Promise<TurnResult | undefined> {
    return new Promise((resolve) => {
      this.lanes.enqueue(key, (laneSignal) => this.exclusive(key, async () => {
        // Queue modes: a message another turn carried (steer) has nothing left to run.
        const plan = begin?.();
        if (plan?.kind === 'carried') return resolve(await plan.result);
        const stopTyping = this.outbound.startTyping(message, logger);
        acknowledgeTurn(this.outbound, this.options.config, message, logger);
        const live = this.startLive(message, correlationId, logger, durable, replay, job);
        let result: TurnResult | undefined;
        let finished = true;
        try {
          // A long text's token counts, a few ms at a time, so the turn's synchronous counting never stalls the
          // other lanes; here on the lane (fresh, replayed and cluster-claimed messages alike), keeping their order.
          if (message.text.length >= WARM_FROM_CHARS) {
            await warmTokenCounts(message.text, this.models, this.options.warm);
            logger.debug({ chars: message.text.length, replayed: Boolean(replay) }, 'token counts warmed before the turn');
          }
          result = await this.options.runtime.runTurn({
            message, sessionKey: key, correlationId, signal: laneSignal, clientSignal: options.signal, onDelta: bothDeltas(options.onDelta, live?.onDelta), replayed: Boolean(replay),
            groupContext: message.chatType === 'direct' ? undefined : await (this.options.sharedGroupContext?.take(key) ?? this.groupContext.take(key)),
            logger: logger.child({ sessionKey: key }),
            lendSlot: (work) => this.lanes.lend(work),
            ...(this.outbound.hasTarget(message) ? { sendFile: (file: OutboundFile, caption?: string) => this.sendFile(message, file, caption) } : {}),
            ...(job ? jobJoins(job) : turnJoins(plan)),
          });
          await this.markCarried(plan, logger);
          await stopTyping();
          await this.outbound.deliverReplies(message, deliverable(message, result.replies), logger, durable, replay?.sent ?? 0, job, live);
          // No reply to finish it with (a skipped turn): the live reply stops where it is.
          await live?.abandon();
        } catch (error) {
          await stopTyping();
          await live?.abandon();
          if (await this.options.queue?.lockLost()) {
            // Another replica takes the session over and runs this message again: nothing more from here.
            logger.warn({ err: error, sessionKey: key }, 'the session lock was lost during the turn; another replica runs it again');
            finished = false;
          } else {
            result = await this.handleFailure(message, key, correlationId, error, logger, isInterrupt(laneSignal));
            if (this.closing && isAbortError(error)) finished = false;
          }
        } finally {
          void stopTyping();
          // What the turn asks to queue is journaled before the turn is marked done, so a crash in between loses
          // nothing; ids derived from this message make the follow-ups of a replayed turn duplicates.
          if (finished && result) await this.followUp(message, key, result, logger).catch((err: unknown) => logger.error({ err }, 'could not queue the follow-up of a turn'));
          if (finished) await this.markCarried(plan, logger);
          if (durable && finished && !job) await this.options.inbox?.done(message).catch((err: unknown) => logger.error({ err }, 'could not journal a finished message'));
          if (job && finished) await this.options.queue?.done(job, result).catch((err: unknown) => logger.error({ err }, 'could not mark a finished message done'));
          if (plan?.kind === 'run') plan.end(result);
          resolve(result);
        }
      }, job).catch((error: unknown) => {
        // The session lock could not be had (the database is unreachable, or another replica kept it), or the
        // claim of a queued message lost it before its turn began: another replica runs that message.
        if (job && error instanceof LeaseLostError) logger.warn({ err: error, sessionKey: key, seq: job.seq }, 'the claim of a queued message lost its session lock before the turn began; another replica runs it');
        else logger.error({ err: error, sessionKey: key }, 'the turn could not take its session lock');
        resolve(undefined);
      }), () => resolve(undefined));
    });
  }

  /** `send_file`: the file is copied into the media store first (the web chat and the dashboard link it), then uploaded. */
  private async sendFile(message: InboundMessage, file: OutboundFile, caption?: string): Promise<void> {
    const store = this.options.mediaStore;
    const stored = store ? await store.put(createReadStream(file.path), { mime: file.mime, maxBytes: this.options.config.media.maxBytes, now: this.options.clock.now() }) : undefined;
    await this.outbound.sendFile(message, stored ? { ...file, sha256: stored.sha256 } : file, caption);
  }

  /**
   * The turn's live reply where its chat streams; a replay's journaled posts are edited, not posted again. The posts
   * are journaled with the message: in the inbox journal, or (a claimed job) in the shared queue.
   */
  private startLive(message: InboundMessage, correlationId: string, logger: Logger, durable: boolean, replay?: Replay, job?: QueuedJob): LiveTurn | undefined {
    // A replay whose answer the platform already has shows nothing more.
    if (replay && replay.sent > 0) return undefined;
    const { inbox, queue } = this.options;
    const onPosted = job && queue ? (ids: readonly string[]) => queue.live(job, ids)
      : durable && inbox ? (ids: readonly string[]) => inbox.live(message, ids) : undefined;
    return this.live.start(message, correlationId, this.outbound.adapterFor(message.channel, message.accountId), logger, replay?.live, onPosted);
  }

  /** A goal run's next background batch, or a sub-agent's final answer for its parent. */
  private async followUp(message: InboundMessage, key: string, result: TurnResult, logger: Logger): Promise<void> {
    const reportTo = message.internal?.reportTo;
    if (result.continuation) {
      await this.submitInternal({ kind: 'background_auto_continue', sessionKey: key, deliverTo: result.continuation.deliverTo, ...(reportTo ? { reportTo } : {}) },
        goalPrompt('background_auto_continue'), `${message.id}:next`, logger);
      return;
    }
    if (!reportTo || result.outcome === 'skipped') return;
    const verb = result.outcome === 'failed' ? 'failed' : result.outcome === 'stopped' ? 'was stopped' : 'finished';
    await this.submitInternal({ kind: 'subagent_result', sessionKey: reportTo.sessionKey, fromKey: key, deliverTo: reportTo.deliverTo, parentCorrelationId: reportTo.correlationId },
      `[subagent ${reportTo.label} ${verb}] ${answerOf(result) || '(no answer)'}`, `${message.id}:report`, logger);
  }

  /** Queues an internal message (journaled like a platform delivery; a repeated id is a duplicate). */
  async submitInternal(route: InternalRoute, text: string, id: string | undefined, logger: Logger = this.options.logger): Promise<Submission | undefined> {
    const message = internalMessage(route, text, this.options.clock.now());
    if (id) message.id = id;
    if (this.closing) return undefined;
    const submission = await this.submit(message);
    if (submission.status === 'duplicate') logger.debug({ id: message.id }, 'internal follow-up already queued');
    return submission;
  }

  /**
   * Queues `background_auto_resume` for sessions a stop or crash left running toward a goal (SPEC §11),
   * one every `staggerMs`, each within the background limit. Sessions with background work already queued
   * (replayed from the journal) are left to it.
   */
  resumeRuns(keys: readonly string[], staggerMs: number, deliverTo: (key: string) => InternalRoute['deliverTo']): number {
    let delay = 0;
    let queued = 0;
    for (const key of keys) {
      if (this.background.isPending(key)) continue;
      queued++;
      const timer = setTimeout(() => {
        void this.submitInternal({ kind: 'background_auto_resume', sessionKey: key, deliverTo: deliverTo(key) }, goalPrompt('background_auto_resume'), undefined)
          .catch((err: unknown) => this.options.logger.error({ err, sessionKey: key }, 'could not resume a background run'));
      }, delay);
      timer.unref();
      delay += staggerMs;
    }
    return queued;
  }

  private async handleFailure(message: InboundMessage, key: string, correlationId: string, error: unknown, logger: Logger, interrupted = false): Promise<TurnResult> {
    const base = { sessionKey: key, sessionId: '', correlationId, usage: zeroUsage(), usageEstimated: false };
    if (error instanceof TurnAbortedError || isAbortError(error)) {
      logger.info(interrupted ? 'turn interrupted by a newer message (queue mode interrupt)' : 'turn stopped');
      // Interrupted: its partial answer is in the transcript, marked so; the newer message's turn answers.
      if (this.closing || interrupted) return { ...base, replies: [], outcome: 'stopped' };
      const reply: OutboundMessage = { text: '⏹ Stopped.', kind: 'notice', threadId: message.threadId, replyTo: message.id };
      await this.outbound.deliver(message, reply, logger);
      return { ...base, replies: [reply], outcome: 'stopped' };
    }
    this.stats.failed++;
    logger.error({ err: error, code: (error as SwitchboardError).code }, 'turn failed');
    const reply: OutboundMessage = {
      text: error instanceof ChosenModelError ? error.message : `Sorry, something went wrong while answering that (ref ${correlationId.slice(0, 8)}). Please try again.`,
      kind: 'error', threadId: message.threadId, replyTo: message.id,
    };
    await this.outbound.deliver(message, reply, logger);
    return { ...base, replies: [reply], outcome: 'failed' };
  }
}

/** The replies that go out: a heartbeat that has nothing to say (`HEARTBEAT_OK`, or empty) says nothing (SPEC §17). */
function deliverable(message: InboundMessage, replies: OutboundMessage[]): OutboundMessage[] {
  return message.internal?.kind === 'heartbeat' ? replies.filter((r) => !isQuietHeartbeat(r.text)) : replies;
}

