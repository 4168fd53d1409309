import type { ChannelAccountConfig } from '../config/resolved.ts';
import type { InboundMessage } from '../core/message.ts';
import type { PairingStore } from './pairing.ts';

/** What the DM/group policy decided for a message. */
export type AccessDecision =
  | { action: 'run' }
  /** Group message without a mention: keep as context, no run. */
  | { action: 'skip'; reason: string }
  /** Refused; `reply` (a pairing code, a notice) is sent when present. */
  | { action: 'block'; reason: string; reply?: string };

/** Channels with no platform policy (built-in, local). */
const TRUSTED_CHANNELS = new Set(['webchat', 'cli', 'api', 'internal']);

/**
 * Applies SPEC §10: `dmPolicy` (pairing, allowlist, open, disabled) with `allowFrom`; `groupPolicy`
 * (allowlist, open) over group/guild/channel ids; `requireMention`.
 */
export async function decideAccess(
  message: InboundMessage,
  account: ChannelAccountConfig | undefined,
  pairing: PairingStore | undefined,
  options: { isCommand: boolean },
): Promise<AccessDecision> {
  if (TRUSTED_CHANNELS.has(message.channel)) return { action: 'run' };
  if (!account) return { action: 'block', reason: `no configuration for ${message.channel} account ${message.accountId}` };
  if (message.sender.isBot) return { action: 'block', reason: 'message from a bot' };
  if (message.chatType === 'direct') return decideDirect(message, account, pairing);
  if (account.groupPolicy === 'allowlist' && !groupAllowed(message, account.groups)) {
    return { action: 'block', reason: `group ${message.groupId} is not in the allowlist` };
  }
  if (account.requireMention && !message.mentionsBot && !options.isCommand) return { action: 'skip', reason: 'not mentioned' };
  return { action: 'run' };
}

async function decideDirect(message: InboundMessage, account: ChannelAccountConfig, pairing: PairingStore | undefined): Promise<AccessDecision> {
  const listed = senderListed(message, account.allowFrom);
  switch (account.dmPolicy) {
    case 'open':
      return { action: 'run' };
    case 'disabled':
      return { action: 'block', reason: 'direct messages are disabled' };
    case 'allowlist':
      return listed ? { action: 'run' } : { action: 'block', reason: 'sender is not in allowFrom' };
    case 'pairing': {
      if (listed) return { action: 'run' };
      if (!pairing) return { action: 'block', reason: 'pairing is unavailable' };
      if (await pairing.isPaired(message.channel, message.peerId)) return { action: 'run' };
      const outcome = await pairing.request(message.channel, message.accountId, message.peerId, message.sender.name ?? message.sender.username);
      if (outcome.status === 'full') {
        return { action: 'block', reason: 'pairing queue full', reply: 'This bot is not open to new people right now (too many pairing requests are waiting). Please try again later.' };
      }
      return {
        action: 'block',
        reason: outcome.status === 'created' ? 'pairing code issued' : 'pairing code pending',
        reply: [
          'Hi! This assistant only talks to people its owner has approved.',
          `Your pairing code: ${outcome.request.code} (valid for 1 hour).`,
          `Ask the owner to run: switchboard pairing approve ${message.channel} ${outcome.request.code}`,
        ].join('\n'),
      };
    }
  }
}

/** `allowFrom` entries match the sender id, or the username with or without `@`; `*` allows everyone. */
export function senderListed(message: InboundMessage, allowFrom: readonly string[]): boolean {
  const id = message.sender.id.toLowerCase();
  const username = message.sender.username?.toLowerCase();
  return allowFrom.some((raw) => {
    const entry = raw.trim().toLowerCase().replace(new RegExp(`^${message.channel}:`), '');
    return entry === '*' || entry === id || (username !== undefined && entry.replace(/^@/, '') === username);
  });
}

/** A group matches when its id, an enclosing space (guild, team), or `<space>:<group>` is listed; `*` allows all. */
export function groupAllowed(message: InboundMessage, groups: readonly string[]): boolean {
  const candidates = new Set<string>();
  if (message.groupId) candidates.add(message.groupId.toLowerCase());
  for (const container of message.containerIds ?? []) {
    candidates.add(container.toLowerCase());
    if (message.groupId) candidates.add(`${container}:${message.groupId}`.toLowerCase());
  }
  return groups.some((g) => g === '*' || candidates.has(g.trim().toLowerCase()));
}
