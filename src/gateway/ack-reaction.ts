import { DEFAULT_ACK_REACTION } from '../config/ack-reaction.ts';
import type { ChannelAccountConfig, ResolvedConfig } from '../config/resolved.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import type { Outbound } from './outbound.ts';

/** The account a platform message came in on, if it is configured. */
function accountOf(config: ResolvedConfig, message: InboundMessage): ChannelAccountConfig | undefined {
  const list = (config.channels as unknown as Record<string, ChannelAccountConfig[] | undefined>)[message.channel];
  return Array.isArray(list) ? list.find((a) => a.accountId === message.accountId) : undefined;
}

/**
 * The ack reaction a message gets when its turn starts (SPEC §16): its account's `ackReaction` for its chat type
 * (default 👀 in groups and channels, none in direct messages); none for internal work and channels without one.
 */
export function ackReactionOf(config: ResolvedConfig, message: InboundMessage): string | undefined {
  if (message.channel === 'internal') return undefined;
  const account = accountOf(config, message);
  if (!account) return undefined;
  const setting = account.ackReaction ?? DEFAULT_ACK_REACTION;
  const emoji = message.chatType === 'direct' ? setting.direct : setting.group;
  return emoji.trim() ? emoji.trim() : undefined;
}

/** Puts the ack reaction on a message whose turn starts, in the background: the turn never waits for it. */
export function acknowledgeTurn(outbound: Outbound, config: ResolvedConfig, message: InboundMessage, logger: Logger): void {
  const emoji = ackReactionOf(config, message);
  if (emoji) outbound.react(message, emoji, logger);
}
