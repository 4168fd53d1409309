import { ConfigError } from '../core/errors.ts';
import type { ChatType } from '../core/message.ts';
import type { Binding } from './schema.ts';

/** Chat types each channel has; a peer of another kind can never match. */
const CHAT_TYPES: Record<string, readonly ChatType[]> = {
  telegram: ['direct', 'group'], discord: ['direct', 'channel'], slack: ['direct', 'channel'], webchat: ['direct'], cli: ['direct'], api: ['direct'],
};

/**
 * Start-up check of `bindings`: an unknown agent, two bindings with the same match, or a match that can never
 * happen (a guild outside Discord, a team outside Slack, a peer kind the channel does not have, an account the
 * channel does not configure, any match on the API, which picks its agent by `model`) is a configuration error
 * naming the entry.
 */
export function validateBindings(bindings: readonly Binding[], agentIds: readonly string[], accountsOf: (channel: string) => readonly string[]): void {
  const problems: string[] = [];
  const seen = new Map<string, number>();
  bindings.forEach((b, i) => {
    const where = `bindings[${i}]`;
    const m = b.match;
    if (!agentIds.includes(b.agentId)) problems.push(`${where}.agentId: no agent "${b.agentId}" in agents.list (${agentIds.join(', ')})`);
    // The API route always names its agent (from `model` or the session key), and that wins over bindings.
    if (m.channel === 'api') problems.push(`${where}.match.channel: the API picks its agent by "model" (an agent id); bindings do not apply to it`);
    if (m.guildId && m.channel !== 'discord') problems.push(`${where}.match.guildId: only Discord messages have a guild, but the channel is ${m.channel}`);
    if (m.teamId && m.channel !== 'slack') problems.push(`${where}.match.teamId: only Slack messages have a team, but the channel is ${m.channel}`);
    if (m.guildId && m.peer?.kind === 'direct') problems.push(`${where}.match: a Discord direct message has no guild, so guildId and peer.kind "direct" never match together; drop guildId`);
    if (m.peer && !CHAT_TYPES[m.channel]?.includes(m.peer.kind)) problems.push(`${where}.match.peer.kind: ${m.channel} has no ${m.peer.kind} chats (it has ${CHAT_TYPES[m.channel]?.join(', ')})`);
    if (m.accountId) {
      const accounts = accountsOf(m.channel);
      if (!accounts.includes(m.accountId)) problems.push(`${where}.match.accountId: ${m.channel} has no account "${m.accountId}" (${accounts.join(', ') || 'none configured'})`);
    }
    const signature = JSON.stringify([m.channel, m.accountId ?? null, m.peer ? [m.peer.kind, m.peer.id.toLowerCase()] : null, m.guildId?.toLowerCase() ?? null, m.teamId?.toLowerCase() ?? null]);
    const first = seen.get(signature);
    if (first !== undefined) problems.push(`${where}.match: the same match as bindings[${first}]; keep one of them`);
    else seen.set(signature, i);
  });
  if (problems.length) throw new ConfigError(`Invalid configuration:\n  - ${problems.join('\n  - ')}`, problems);
}
