import type { ChannelAdapter } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import { targetOf, type InboundMessage, type OutboundMessage } from '../core/message.ts';
import { deliveryKey, type Inbox } from './inbox.ts';
import type { QueuedJob, SharedQueue } from './shared-queue.ts';

/** The way out to the platforms: the channel adapters, replies with their journal marks, typing indicators. */
export class Outbound {
  private readonly adapters = new Map<string, ChannelAdapter>();

  constructor(private readonly options: { inbox?: Inbox; queue?: SharedQueue; typingIntervalMs?: number }) {}

  add(adapter: ChannelAdapter): void {
    this.adapters.set(`${adapter.id}:${adapter.accountId}`, adapter);
  }

  adapterFor(channel: string, accountId: string): ChannelAdapter | undefined {
    return this.adapters.get(`${channel}:${accountId}`);
  }

  /**
   * Sends a turn's replies, journaling each one the platform accepted, so a replay after a stop sends only
   * those it had not (a crash between the platform's acceptance and the journal line can still repeat one).
   */
  async deliverReplies(message: InboundMessage, replies: readonly OutboundMessage[], logger: Logger, durable: boolean, alreadySent: number, job?: QueuedJob): Promise<void> {
    if (alreadySent > 0) logger.info({ skipped: Math.min(alreadySent, replies.length) }, 'replay: replies the platform already has are not sent again');
    for (let i = alreadySent; i < replies.length; i++) {
      // Cluster mode: recorded through the session lock's connection, so a replica that lost it sends nothing more.
      if (job) await this.options.queue?.sending(job, i);
      const reply = replies[i] as OutboundMessage;
      // The same reply of the same message keeps its key across a replay: a channel can make the resend idempotent.
      const keyed = message.channel === 'internal' ? reply : { ...reply, idempotencyKey: `${deliveryKey(message)}:${i}` };
      if (!(await this.deliver(message, keyed, logger))) continue;
      if (job) await this.options.queue?.sent(job, i + 1);
      else if (durable) await this.options.inbox?.sent(message, i + 1).catch((err: unknown) => logger.warn({ err }, 'could not journal a sent reply'));
    }
  }

  async deliver(message: InboundMessage, reply: OutboundMessage, logger: Logger): Promise<boolean> {
    // Internal messages answer into the chat they name (a goal's chat, a spawning parent's chat), or nowhere.
    const target = message.channel === 'internal' ? message.internal?.deliverTo : targetOf(message);
    const adapter = target && this.adapterFor(target.channel, target.accountId);
    if (!target || !adapter) return false;
    try {
      await adapter.send(target, message.channel === 'internal' ? { ...reply, replyTo: undefined } : reply);
      return true;
    } catch (error) {
      logger.error({ err: error }, 'reply could not be delivered');
      return false;
    }
  }

  startTyping(message: InboundMessage, logger: Logger): () => void {
    const adapter = this.adapterFor(message.channel, message.accountId);
    if (!adapter?.typing) return () => undefined;
    const target = targetOf(message);
    const tick = () => { adapter.typing!(target).catch((err: unknown) => logger.debug({ err }, 'typing indicator failed')); };
    tick();
    const timer = setInterval(tick, this.options.typingIntervalMs ?? 5000);
    timer.unref();
    return () => clearInterval(timer);
  }
}
