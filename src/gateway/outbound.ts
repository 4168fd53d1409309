import type { ChannelAdapter } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import { targetOf, type InboundMessage, type OutboundFile, type OutboundMessage } from '../core/message.ts';
import { ChannelError } from '../core/errors.ts';
import { splitImageLines, type MarkdownPart } from '../core/markdown-images.ts';
import { deliveryKey, type Inbox } from './inbox.ts';
import { DEFAULT_TYPING_LAPSE_MS, startTypingLoop, typingRefreshMs, type TypingTimers } from './typing-loop.ts';
import type { LiveTurn } from './live-turn.ts';
import type { QueuedJob, SharedQueue } from './shared-queue.ts';
import type { DeliveryFailure } from '../core/delivery-retry.ts';

/** How many given-up replies are kept for `/status` and the dashboard. */
const RECENT_FAILURES = 20;

/** The way out to the platforms: the channel adapters, replies with their journal marks, typing indicators. */
export class Outbound {
  private readonly adapters = new Map<string, ChannelAdapter>();
  /** Replies given up on, by `channel/account`, since start. */
  readonly failedByChannel = new Map<string, number>();
  /** The last given-up replies, newest last. */
  readonly recentFailures: DeliveryFailure[] = [];

  constructor(private readonly options: { inbox?: Inbox; queue?: SharedQueue; typingIntervalMs?: number; typingTimers?: TypingTimers; now?: () => number }) {}

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
  async deliverReplies(message: InboundMessage, replies: readonly OutboundMessage[], logger: Logger, durable: boolean, alreadySent: number, job?: QueuedJob, live?: LiveTurn): Promise<void> {
    if (alreadySent > 0) logger.info({ skipped: Math.min(alreadySent, replies.length) }, 'replay: replies the platform already has are not sent again');
    for (let i = alreadySent; i < replies.length; i++) {
      // Cluster mode: recorded through the session lock's connection, so a replica that lost it sends nothing more.
      if (job) await this.options.queue?.sending(job, i);
      const reply = replies[i] as OutboundMessage;
      // The same reply of the same message keeps its key across a replay: a channel can make the resend idempotent.
      const keyed = message.channel === 'internal' ? reply : { ...reply, idempotencyKey: `${deliveryKey(message)}:${i}` };
      // The first reply of a streamed turn is finished by editing what was posted live (SPEC §16).
      const delivered = i === 0 && live ? await this.finishLive(message, keyed, live, logger) : await this.deliver(message, keyed, logger);
      if (!delivered) continue;
      if (job) await this.options.queue?.sent(job, i + 1);
      else if (durable) await this.options.inbox?.sent(message, i + 1).catch((err: unknown) => logger.warn({ err }, 'could not journal a sent reply'));
    }
  }

  /** Makes a live reply the complete answer; sends it the ordinary way when nothing was posted live. */
  private async finishLive(message: InboundMessage, reply: OutboundMessage, live: LiveTurn, logger: Logger): Promise<boolean> {
    // Images on their own line go out natively (SPEC §15): the live message ends with the text before the first
    // one, and the rest is sent the ordinary way, images and text in order.
    const split = splitAtFirstImage(reply.text);
    if (split) {
      const head = split.head ? await this.finishLive(message, { ...reply, text: split.head }, live, logger) : (await live.abandon(), true);
      const rest = await this.deliver(message, { ...reply, text: split.rest, notice: split.head ? undefined : reply.notice, ...(reply.idempotencyKey ? { idempotencyKey: `${reply.idempotencyKey}:images` } : {}) }, logger);
      return head && rest;
    }
    try {
      if (await live.finish(reply)) return true;
    } catch (error) {
      logger.error({ err: error, chatId: message.chatId }, 'the final edit of a live reply could not be delivered; given up');
      this.recordFailure(targetOf(message), error, message.correlationId ?? correlationIdOf(logger));
      return false;
    }
    return this.deliver(message, reply, logger);
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
      // The channel has already retried what the platform did not take (`delivery.maxAttempts`).
      logger.error({ err: error, chatId: target.chatId }, 'reply could not be delivered; given up');
      this.recordFailure(target, error, message.correlationId ?? correlationIdOf(logger));
      return false;
    }
  }

  /**
   * Sends a file into the chat a message came from (or an internal message names) as a native upload, after
   * the channel's own retries; rejects when there is no such chat or the platform refused it (the tool says so).
   */
  async sendFile(message: InboundMessage, file: OutboundFile, caption: string | undefined): Promise<void> {
    const target = message.channel === 'internal' ? message.internal?.deliverTo : targetOf(message);
    const adapter = target && this.adapterFor(target.channel, target.accountId);
    if (!target || !adapter) throw new ChannelError('CHANNEL_NO_TARGET', 'This conversation has no chat to send a file to.');
    try {
      await adapter.send(target, { text: caption ?? '', files: [file], kind: 'reply', ...(target.threadId ? { threadId: target.threadId } : {}) });
    } catch (error) {
      this.recordFailure(target, error, message.correlationId);
      throw error;
    }
  }

  /** Whether replies to `message` have a chat to go to. */
  hasTarget(message: InboundMessage): boolean {
    const target = message.channel === 'internal' ? message.internal?.deliverTo : targetOf(message);
    return Boolean(target && this.adapterFor(target.channel, target.accountId));
  }

  private recordFailure(target: { channel: string; accountId: string; chatId: string }, error: unknown, correlationId?: string): void {
    const name = `${target.channel}/${target.accountId}`;
    this.failedByChannel.set(name, (this.failedByChannel.get(name) ?? 0) + 1);
    const code = (error as { code?: unknown })?.code;
    this.recentFailures.push({
      at: new Date(this.options.now?.() ?? Date.now()).toISOString(), channel: target.channel, accountId: target.accountId, chatId: target.chatId,
      ...(correlationId ? { correlationId } : {}), ...(typeof code === 'string' ? { code } : {}),
      error: (error instanceof Error ? error.message : String(error)).split('\n')[0]!.slice(0, 300),
    });
    if (this.recentFailures.length > RECENT_FAILURES) this.recentFailures.shift();
  }

  /**
   * Puts `emoji` on the received message, in the background (the channel retries as it does deliveries, then
   * gives up); a refusal is logged, never the turn's failure.
   */
  react(message: InboundMessage, emoji: string, logger: Logger): void {
    const adapter = this.adapterFor(message.channel, message.accountId);
    if (!adapter?.react) return;
    const reacting = Promise.resolve().then(() => adapter.react!(targetOf(message), message.id, emoji));
    reacting.then(
      () => logger.debug({ emoji, messageId: message.id }, 'ack reaction added'),
      (err: unknown) => logger.warn({ err, emoji, messageId: message.id }, 'ack reaction could not be added'),
    );
  }

  /**
   * Shows the typing indicator in the message's chat now and again before it lapses (the adapter's
   * `typingLapseMs`; `typingIntervalMs` overrides), through model calls and tool calls alike, until the returned
   * function is called; that resolves once a refresh in flight settled, so the reply is not followed by one.
   */
  startTyping(message: InboundMessage, logger: Logger): () => Promise<void> {
    const adapter = this.adapterFor(message.channel, message.accountId);
    if (!adapter?.typing) return () => Promise.resolve();
    const target = targetOf(message);
    const interval = this.options.typingIntervalMs ?? typingRefreshMs(adapter.typingLapseMs ?? DEFAULT_TYPING_LAPSE_MS);
    const loop = startTypingLoop(() => adapter.typing!(target), interval, (err) => logger.debug({ err }, 'typing indicator failed'), this.options.typingTimers);
    return () => loop.stop();
  }
}

/** An answer with a markdown image line: the text before the first one, and the rest as markdown; undefined without one. */
function splitAtFirstImage(text: string): { head: string; rest: string } | undefined {
  const parts = splitImageLines(text);
  const first = parts.findIndex((p) => p.kind === 'image');
  if (first < 0) return undefined;
  const markdown = (p: MarkdownPart) => (p.kind === 'text' ? p.text : `![${p.alt}](${p.url})`);
  return { head: parts.slice(0, first).map(markdown).join('\n\n'), rest: parts.slice(first).map(markdown).join('\n\n') };
}

/** The correlation id the turn's logger carries (the gateway makes one when the message had none). */
function correlationIdOf(logger: Logger): string | undefined {
  try {
    const id = (logger.bindings() as { correlationId?: unknown }).correlationId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}
