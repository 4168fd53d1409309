import { randomUUID } from 'node:crypto';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { ChannelAdapter, InboundSink, Submission } from '../core/channel-adapter.ts';
import { SwitchboardError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import { targetOf, type ChannelId, type InboundMessage } from '../core/message.ts';
import { warmTokenCounts, type WarmOptions } from './tokens.ts';

/** An inbound message is longer than its channel allows (HTTP 413 for API and web chat callers). */
export class InboundTooLargeError extends SwitchboardError {
  readonly limit: number;
  readonly length: number;
  constructor(length: number, limit: number, setting: string) {
    super('INBOUND_TOO_LARGE', tooLongText(length, limit, setting), { status: 413 });
    this.limit = limit;
    this.length = length;
  }
}

/** Channels whose callers wait on an HTTP response or a terminal: they get the error, not a chat reply. */
const CALLER_CHANNELS = new Set<ChannelId>(['webchat', 'api', 'cli']);
/** Platform channels answer an oversized message in the chat it came from. */
const PLATFORM_CHANNELS = new Set<ChannelId>(['telegram', 'discord', 'slack']);

/** Options of {@link guardInbound}. */
export interface InboundGuardOptions {
  config: Pick<ResolvedConfig, 'gateway' | 'channels' | 'agents'>;
  logger: Logger;
  /** The adapter that answers a platform message. */
  adapterFor(channel: string, accountId: string): ChannelAdapter | undefined;
  /** How token counts are warmed (tests inject a clock and yields). */
  warm?: WarmOptions;
}

function tooLongText(length: number, limit: number, setting: string): string {
  return `That message is too long for me: ${length} characters, and this channel takes at most ${limit} (${setting}). `
    + 'Please send it in shorter parts.';
}

/** The largest inbound text (characters) a channel takes, and the setting that says so. */
export function inboundLimitOf(config: InboundGuardOptions['config'], message: Pick<InboundMessage, 'channel' | 'accountId'>): { limit: number; setting: string } {
  const gateway = { limit: config.gateway.maxInboundChars, setting: 'gateway.maxInboundChars' };
  if (message.channel === 'webchat') {
    const own = config.channels.webchat.maxInboundChars;
    return own ? { limit: own, setting: 'channels.webchat.maxInboundChars' } : gateway;
  }
  if (PLATFORM_CHANNELS.has(message.channel)) {
    const accounts = config.channels[message.channel as 'telegram' | 'discord' | 'slack'];
    const own = accounts.find((a) => a.accountId === message.accountId)?.maxInboundChars;
    return own ? { limit: own, setting: `channels.${message.channel}.maxInboundChars` } : gateway;
  }
  return gateway;
}

/**
 * Wraps the gateway's sink for channels and the HTTP API: a text over its channel's limit
 * (`channels.<ch>.maxInboundChars`, else `gateway.maxInboundChars`) is refused with one clear answer (in
 * the chat for platforms, a 413 for HTTP callers) and nothing else is affected; a long text that is taken
 * has its token counts computed a few milliseconds at a time before the turn needs them, so counting it
 * never stalls the other channels. `internal` messages (session tools) pass untouched.
 */
export function guardInbound(sink: InboundSink, options: InboundGuardOptions): InboundSink {
  const models = [...new Set(options.config.agents.map((a) => a.model))];
  return async (message, submitOptions) => {
    if (message.channel === 'internal') return sink(message, submitOptions);
    const { limit, setting } = inboundLimitOf(options.config, message);
    const length = message.text.length;
    if (length > limit) {
      message.correlationId ??= randomUUID();
      const log = options.logger.child({ channel: message.channel, accountId: message.accountId, correlationId: message.correlationId });
      log.warn({ length, limit, messageId: message.id }, 'inbound message over the size limit; refused');
      if (CALLER_CHANNELS.has(message.channel) || !PLATFORM_CHANNELS.has(message.channel)) throw new InboundTooLargeError(length, limit, setting);
      const adapter = options.adapterFor(message.channel, message.accountId);
      // Answered in the background: the platform's acknowledgement does not wait for the reply.
      void adapter?.send(targetOf(message), { text: tooLongText(length, limit, setting), kind: 'error', threadId: message.threadId })
        .catch((err: unknown) => log.warn({ err }, 'could not tell the sender that the message is too long'));
      const refused: Submission = { status: 'blocked', correlationId: message.correlationId, done: Promise.resolve(undefined) };
      return refused;
    }
    if (length >= 256) await warmTokenCounts(message.text, models, options.warm);
    return sink(message, submitOptions);
  };
}
