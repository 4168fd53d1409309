import type { Binding } from '../config/schema.ts';
import type { ChatType } from '../core/message.ts';

/** What a binding is matched against: the routing facts of a message (or of a stored session). */
export interface BindingFacts {
  channel: string;
  accountId: string;
  chatType: ChatType;
  peerId?: string;
  groupId?: string;
  /** Discord guild / Slack team ids. */
  containerIds?: readonly string[];
}

/** How specific a binding is: peer, then guild/team, then account, then channel (SPEC §12). */
export function specificity(binding: Binding): number {
  const m = binding.match;
  return (m.peer ? 8 : 0) + (m.guildId || m.teamId ? 4 : 0) + (m.accountId ? 2 : 0) + 1;
}

function matches(binding: Binding, facts: BindingFacts): boolean {
  const m = binding.match;
  if (m.channel !== facts.channel) return false;
  if (m.accountId && m.accountId !== facts.accountId) return false;
  // Ids compare case-insensitively, as peer ids do (a Slack team id may be written in either case).
  if (m.guildId && !hasId(facts.containerIds, m.guildId)) return false;
  if (m.teamId && !hasId(facts.containerIds, m.teamId)) return false;
  if (m.peer) {
    if (m.peer.kind !== facts.chatType) return false;
    const id = facts.chatType === 'direct' ? facts.peerId : facts.groupId;
    if (id?.toLowerCase() !== m.peer.id.toLowerCase()) return false;
  }
  return true;
}

function hasId(ids: readonly string[] | undefined, wanted: string): boolean {
  const lower = wanted.toLowerCase();
  return (ids ?? []).some((id) => id.toLowerCase() === lower);
}

/** The agent of a message: the most specific matching binding's, else `fallback` (the first agent). */
export function agentOf(bindings: readonly Binding[], facts: BindingFacts, fallback: string): string {
  let best: Binding | undefined;
  for (const b of bindings) if (matches(b, facts) && (!best || specificity(b) > specificity(best))) best = b;
  return best?.agentId ?? fallback;
}

