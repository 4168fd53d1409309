import { answersInChat, InboundTooLargeError, oversizeOf, type Oversize } from '../agent/inbound-guard.ts';
import type { ChannelAccountConfig } from '../config/resolved.ts';
import type { Submission, SubmitOptions, TurnResult } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import { decideAccess } from '../routing/access-policy.ts';
import type { GatewayOptions, GatewayStats } from './gateway-options.ts';
import type { GroupContextBuffer } from './group-context.ts';
import type { Outbound } from './outbound.ts';
import { SenderRateLimiter } from './rate-limit.ts';
import type { SeenOutcome } from './shared-queue.ts';

/** What admission needs from the gateway: its options and counters, the way out, and the two ways a message runs. */
export interface AdmissionDeps {
  options: GatewayOptions;
  stats: GatewayStats;
  outbound: Outbound;
  groupContext: GroupContextBuffer;
  /** The session key of a message (SPEC §2); throws when it has none. */
  sessionKeyOf(message: InboundMessage): string;
  /** Answers `/stop` or `/status` at once, outside the session's lane. */
  runImmediate(message: InboundMessage, key: string, correlationId: string, logger: Logger): Promise<TurnResult | undefined>;
  /** Queues the message on its session's lane; settles when its turn ends. */
  enqueue(message: InboundMessage, key: string, correlationId: string, options: SubmitOptions, logger: Logger, durable: boolean): Promise<TurnResult | undefined>;
}

/**
 * The route-admission steps of a message whose delivery the gateway claimed: DM/group policy → session key →
 * per-sender rate limit → size limit → accepted (answered at once, committed to the shared queue, or journaled and
 * put on its lane). Each refusal on the way is recorded with the delivery id, so a redelivery is a duplicate.
 */
export class Admission {
  private readonly deps: AdmissionDeps;
  private readonly options: GatewayOptions;
  private readonly stats: GatewayStats;
  private readonly outbound: Outbound;
  private readonly groupContext: GroupContextBuffer;
  private readonly rateLimiter: SenderRateLimiter;

  constructor(deps: AdmissionDeps) {
    this.deps = deps;
    this.options = deps.options;
    this.stats = deps.stats;
    this.outbound = deps.outbound;
    this.groupContext = deps.groupContext;
    this.rateLimiter = new SenderRateLimiter(deps.options.config.limits.perSender, deps.options.clock, { buckets: deps.options.rateBuckets, logger: deps.options.logger });
  }

  /** A delivery already taken: counted, logged, nothing queued. */
  duplicate(message: InboundMessage, correlationId: string, logger: Logger): Submission {
    this.stats.duplicates++;
    logger.info({ messageId: message.id, deliveryId: message.deliveryId }, 'duplicate delivery ignored');
    return { status: 'duplicate', correlationId, done: Promise.resolve(undefined) };
  }

  /** Records a delivery id whose message is not queued; false when a cluster replica had seen it already. */
  private async seen(message: InboundMessage, deduped: boolean, outcome: SeenOutcome): Promise<boolean> {
    if (!deduped) return true;
    this.options.inbox?.markSeen(message);
    return this.options.queue ? this.options.queue.markSeen(message, outcome) : true;
  }

  /**
   * Decides a claimed message: refused (policy, no key, rate, size), kept as group context, answered at once,
   * or accepted onto its lane. Resolves once that is recorded, not when the turn ends.
   */
  async route(message: InboundMessage, options: SubmitOptions, correlationId: string, logger: Logger, durable: boolean, deduped: boolean): Promise<Submission> {
    const done = (result?: TurnResult) => Promise.resolve(result);
    const inbox = this.options.inbox;
    const queue = this.options.queue;
    const isCommand = message.text.trim().startsWith('/');
    const decision = await decideAccess(message, this.accountConfig(message), this.options.pairing, { isCommand });
    let sessionKey: string;
    try {
      sessionKey = this.deps.sessionKeyOf(message);
    } catch (error) {
      logger.warn({ err: error }, 'message has no valid session key; dropped');
      this.stats.blocked++;
      await this.seen(message, deduped, 'blocked');
      return { status: 'blocked', correlationId, done: done() };
    }
    if (decision.action === 'block') {
      if (!(await this.seen(message, deduped, 'blocked'))) return this.duplicate(message, correlationId, logger);
      this.stats.blocked++;
      logger.info({ reason: decision.reason, peerId: message.peerId }, 'message refused by policy');
      if (decision.reply) await this.outbound.deliver(message, { text: decision.reply, kind: 'pairing', threadId: message.threadId }, logger);
      return { status: 'blocked', sessionKey, correlationId, done: done() };
    }
    if (decision.action === 'skip') {
      if (!(await this.seen(message, deduped, 'skipped'))) return this.duplicate(message, correlationId, logger);
      this.stats.skipped++;
      const item = { name: message.sender.name ?? message.sender.username ?? message.sender.id, text: message.text, at: message.receivedAt };
      // An oversized message is not kept either: as context it would reach the model past the size limit.
      if (message.text.trim() && !oversizeOf(this.options.config, message)) await (this.options.sharedGroupContext?.add(sessionKey, item) ?? this.groupContext.add(sessionKey, item));
      return { status: 'skipped', sessionKey, correlationId, done: done() };
    }
    const immediate = !message.internal && this.options.runtime.isImmediate(message.text);
    if (!immediate && !message.internal) {
      // /stop and /status are never limited; nothing a tool or a goal run queues is either.
      const limited = await this.rateLimiter.take(message.rateLimitKey ?? `${message.channel}:${message.peerId}`);
      if (!limited.allowed) return this.refuseRate(message, sessionKey, correlationId, limited, logger, deduped);
    }
    const oversize = oversizeOf(this.options.config, message);
    if (oversize) return this.refuseOversize(message, sessionKey, correlationId, oversize, logger, deduped);
    if (immediate) {
      if (!(await this.seen(message, deduped, 'immediate'))) return this.duplicate(message, correlationId, logger);
      this.stats.accepted++;
      return { status: 'accepted', sessionKey, correlationId, done: this.deps.runImmediate(message, sessionKey, correlationId, logger) };
    }
    if (queue && durable) {
      // Cluster mode: committed to the shared queue; whichever replica takes the session runs it.
      const queued = await queue.accept(message, sessionKey, correlationId);
      if (!queued.accepted) return this.duplicate(message, correlationId, logger);
      this.stats.accepted++;
      return { status: 'accepted', sessionKey, correlationId, done: queue.whenDone(sessionKey, queued.seq) };
    }
    if (durable && inbox) await inbox.accept(message, correlationId);
    else if (!(await this.seen(message, deduped, 'accepted'))) return this.duplicate(message, correlationId, logger);
    this.stats.accepted++;
    return { status: 'accepted', sessionKey, correlationId, done: this.deps.enqueue(message, sessionKey, correlationId, options, logger, durable) };
  }

  /** Over `limits.perSender`: not queued, journaled as refused, the sender told once per window (SPEC §14). */
  private async refuseRate(
    message: InboundMessage, sessionKey: string, correlationId: string, limited: { retryAfterMs: number; notify: boolean }, logger: Logger, deduped: boolean,
  ): Promise<Submission> {
    this.stats.rateLimited++;
    const retryAfterSeconds = Math.max(1, Math.ceil(limited.retryAfterMs / 1000));
    this.options.runtime.events.emit('onRefusal', { reason: 'rate_limit', correlationId, channel: message.channel, sessionKey, at: this.options.clock.now() });
    logger.info({ sessionKey, peerId: message.peerId, retryAfterSeconds }, 'message refused: the sender is over limits.perSender');
    if (this.options.inbox && deduped) await this.options.inbox.refuse(message).catch((err: unknown) => logger.warn({ err }, 'could not journal a refused message'));
    if (this.options.queue && deduped) await this.options.queue.markSeen(message, 'refused').catch((err: unknown) => logger.warn({ err }, 'could not record a refused message'));
    if (limited.notify) {
      const perMinute = this.options.config.limits.perSender.perMinute;
      await this.outbound.deliver(message, { text: `Slow down, please: I take at most ${perMinute} message${perMinute === 1 ? '' : 's'} a minute from each person. Messages sent in the next ${retryAfterSeconds} s are not answered.`, kind: 'notice', threadId: message.threadId, replyTo: message.id }, logger);
    }
    return { status: 'rate_limited', retryAfterSeconds, sessionKey, correlationId, done: Promise.resolve(undefined) };
  }

  /**
   * Over its channel's size limit: a waiting caller gets the error (413); a platform sender one line in the
   * chat, once per delivery. Checked only here, after policy, dedupe and the rate limit (no amplification).
   */
  private async refuseOversize(message: InboundMessage, sessionKey: string, correlationId: string, oversize: Oversize, logger: Logger, deduped: boolean): Promise<Submission> {
    logger.warn({ length: oversize.length, limit: oversize.limit, messageId: message.id }, 'inbound message over the size limit; refused');
    if (!answersInChat(message.channel)) throw new InboundTooLargeError(oversize.length, oversize.limit, oversize.setting);
    if (!(await this.seen(message, deduped, 'blocked'))) return this.duplicate(message, correlationId, logger);
    this.stats.blocked++;
    // Answered in the background: the platform's acknowledgement does not wait for the reply.
    void this.outbound.deliver(message, { text: oversize.text, kind: 'error', threadId: message.threadId }, logger);
    return { status: 'blocked', sessionKey, correlationId, done: Promise.resolve(undefined) };
  }

  private accountConfig(message: InboundMessage): ChannelAccountConfig | undefined {
    const channels = this.options.config.channels as unknown as Record<string, ChannelAccountConfig[] | undefined>;
    const list = channels[message.channel];
    return Array.isArray(list) ? list.find((a) => a.accountId === message.accountId) : undefined;
  }
}
