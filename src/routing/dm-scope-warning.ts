import type { ChannelAccountConfig, ResolvedConfig } from '../config/resolved.ts';
import type { PairedPeer } from './pairing.ts';

/** Who can reach the one DM session under `dmScope: "main"`. */
export interface MainScopePeers {
  /** Distinct people (identity links merged), as `channel:id` or the link's name. */
  peers: string[];
  /** Channels whose DMs are open to anyone (`dmPolicy: "open"` or `allowFrom: ["*"]`). */
  openTo: string[];
}

const PLATFORMS = ['telegram', 'discord', 'slack'] as const;

/** Lists the distinct people allowed into direct messages of the enabled channels, paired ones included. */
export function mainScopePeers(config: Pick<ResolvedConfig, 'channels' | 'session'>, paired: readonly PairedPeer[]): MainScopePeers {
  const peers = new Set<string>();
  const openTo = new Set<string>();
  const canonical = (channel: string, id: string) => {
    const wanted = `${channel}:${id}`.toLowerCase();
    for (const [name, ids] of Object.entries(config.session.identityLinks)) {
      if (ids.some((linked) => linked.toLowerCase() === wanted)) return name;
    }
    return wanted;
  };
  for (const channel of PLATFORMS) {
    const accounts = (config.channels[channel] as ChannelAccountConfig[]).filter((a) => a.enabled && a.dmPolicy !== 'disabled');
    for (const account of accounts) {
      if (account.dmPolicy === 'open' || account.allowFrom.some((e) => e.trim() === '*')) {
        openTo.add(channel);
        continue;
      }
      for (const entry of account.allowFrom) peers.add(canonical(channel, entry.trim().replace(new RegExp(`^${channel}:`, 'i'), '').replace(/^@/, '')));
      if (account.dmPolicy === 'pairing') for (const p of paired) if (p.channel === channel) peers.add(canonical(channel, p.peerId));
    }
  }
  return { peers: [...peers].sort(), openTo: [...openTo].sort() };
}

/**
 * The warning of `doctor`, the start-up log and `pairing approve` when `dmScope` is `main` and a second
 * distinct person can reach the bot in a DM: they would all share one conversation.
 */
export function dmScopeWarning(config: Pick<ResolvedConfig, 'channels' | 'session'> & { agents?: readonly { id: string }[] }, paired: readonly PairedPeer[]): string | undefined {
  if (config.session.dmScope !== 'main') return undefined;
  const { peers, openTo } = mainScopePeers(config, paired);
  if (openTo.length === 0 && peers.length < 2) return undefined;
  const who = openTo.length
    ? `direct messages on ${openTo.join(' and ')} are open to anyone`
    : `${peers.length} different people can write to the bot directly (${peers.slice(0, 5).join(', ')}${peers.length > 5 ? ', …' : ''})`;
  // DMs without a binding go to the first agent, so that agent's main session is the shared one.
  const key = `agent:${config.agents?.[0]?.id ?? 'main'}:main`;
  return `session.dmScope is "main" and ${who}: all of them share ONE conversation (${key}) and see each other's context. Set session.dmScope to "per-peer" (or "per-channel-peer") to give each person their own.`;
}
