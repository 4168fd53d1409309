import type { ResolvedConfig } from '../config/resolved.ts';
import { SwitchboardError } from '../core/errors.ts';
import type { ChannelId, InboundMessage } from '../core/message.ts';

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

/** Platform channels answer an oversized message in the chat it came from; any other caller gets the error. */
const PLATFORM_CHANNELS = new Set<ChannelId>(['telegram', 'discord', 'slack']);

/** The settings that say how long an inbound text may be. */
type InboundLimitConfig = Pick<ResolvedConfig, 'gateway' | 'channels'>;

function tooLongText(length: number, limit: number, setting: string): string {
  return `That message is too long for me: ${length} characters, and this channel takes at most ${limit} (${setting}). `
    + 'Please send it in shorter parts.';
}

/** The largest inbound text (characters) a channel takes, and the setting that says so. */
export function inboundLimitOf(config: InboundLimitConfig, message: Pick<InboundMessage, 'channel' | 'accountId'>): { limit: number; setting: string } {
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

/** A message over its channel's size limit: what to say, and the numbers. */
export interface Oversize {
  length: number;
  limit: number;
  setting: string;
  /** The one line a platform sender gets. */
  text: string;
}

/** The refusal of a text over its channel's limit, or undefined when it fits (`internal` messages always fit). */
export function oversizeOf(config: InboundLimitConfig, message: InboundMessage): Oversize | undefined {
  if (message.channel === 'internal') return undefined;
  const { limit, setting } = inboundLimitOf(config, message);
  const length = message.text.length;
  return length > limit ? { length, limit, setting, text: tooLongText(length, limit, setting) } : undefined;
}

/** Whether an oversized message is answered in its chat (platforms) rather than refused to a waiting caller (413). */
export function answersInChat(channel: ChannelId): boolean {
  return PLATFORM_CHANNELS.has(channel);
}
