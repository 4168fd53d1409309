import type { ChatType } from '../core/message.ts';
import { SessionKeyError } from '../core/errors.ts';

/** DM scopes of SPEC §2. */
export type DmScope = 'main' | 'per-peer' | 'per-channel-peer' | 'per-account-channel-peer';

/** Everything that decides a session key. */
export interface SessionRoute {
  agentId: string;
  /** A `ChannelId`, or a channel name this version does not know (kept as it is). */
  channel: string;
  accountId: string;
  chatType: ChatType;
  /** The person, for direct chats. */
  peerId?: string;
  /** The group / channel id, for group and channel chats. */
  groupId?: string;
  threadId?: string;
  threadKind?: 'thread' | 'topic';
  /** A sub-agent session made by `sessions_spawn`: the key is `agent:<agentId>:subagent:<id>`. */
  subagentId?: string;
  /** A scheduled job's own session (SPEC §17): the key is `agent:<agentId>:job:<jobId>`. */
  jobId?: string;
}

/** Session settings that shape keys (`session.*` in the config). */
export interface SessionKeyOptions {
  dmScope: DmScope;
  threads: 'separate' | 'parent';
  identityLinks: Record<string, string[]>;
}

/** A key read back into its parts. */
export interface ParsedSessionKey {
  key: string;
  agentId: string;
  chatType: ChatType;
  /** For direct keys: the scope the key was built under. */
  dmScope?: DmScope;
  channel?: string;
  accountId?: string;
  peerId?: string;
  groupId?: string;
  threadId?: string;
  threadKind?: 'thread' | 'topic';
  /** The key without its thread suffix, for thread keys. */
  parentKey?: string;
  /** Set for sub-agent keys (`agent:<agentId>:subagent:<id>`). */
  subagentId?: string;
  /** Set for a job's isolated session (`agent:<agentId>:job:<jobId>`). */
  jobId?: string;
}

const DIRECT = new Set(['direct', 'dm']);

/**
 * Builds the canonical session key of a route (SPEC §2). The only function in the code base that
 * assembles keys. Segments are lowercased; `:`, `%`, whitespace and control characters inside a value are percent-encoded
 * so that {@link parseSessionKey} always reads back what was built.
 */
export function buildSessionKey(route: SessionRoute, options: SessionKeyOptions): string {
  const agentId = route.agentId || 'main';
  if (route.subagentId) return formatKey({ agentId, chatType: 'direct', channel: 'internal', subagentId: route.subagentId });
  if (route.jobId) return formatKey({ agentId, chatType: 'direct', channel: 'internal', jobId: route.jobId });
  const thread = route.threadId && options.threads !== 'parent'
    ? { threadId: route.threadId, threadKind: route.threadKind === 'topic' ? 'topic' as const : 'thread' as const }
    : {};
  if (route.chatType === 'direct') {
    if (!route.peerId) throw new SessionKeyError('A direct message needs a peer id to build its session key.');
    if (!DM_SCOPES.includes(options.dmScope)) throw new SessionKeyError(`Unknown dmScope "${String(options.dmScope)}".`);
    return formatKey({
      agentId, chatType: 'direct', dmScope: options.dmScope, channel: route.channel,
      accountId: route.accountId || 'default', peerId: linkedPeer(route.channel, route.peerId, options), ...thread,
    });
  }
  if (!route.groupId) throw new SessionKeyError(`A ${route.chatType} message needs a group id to build its session key.`);
  return formatKey({ agentId, chatType: route.chatType, channel: route.channel, groupId: route.groupId, ...thread });
}

const DM_SCOPES: readonly DmScope[] = ['main', 'per-peer', 'per-channel-peer', 'per-account-channel-peer'];

type KeyParts = Omit<ParsedSessionKey, 'key' | 'parentKey'>;

function formatKey(p: KeyParts): string {
  const agent = `agent:${segment(p.agentId, 'agentId')}`;
  if (p.subagentId) return `${agent}:subagent:${segment(p.subagentId, 'subagentId')}`;
  if (p.jobId) return `${agent}:job:${segment(p.jobId, 'jobId')}`;
  let base: string;
  if (p.chatType === 'direct') {
    const peer = () => segment(p.peerId ?? '', 'peerId');
    const channel = () => segment(p.channel ?? '', 'channel');
    switch (p.dmScope) {
      case 'per-peer': base = `${agent}:direct:${peer()}`; break;
      case 'per-channel-peer': base = `${agent}:${channel()}:direct:${peer()}`; break;
      case 'per-account-channel-peer': base = `${agent}:${channel()}:${segment(p.accountId ?? '', 'accountId')}:direct:${peer()}`; break;
      default: base = `${agent}:main`;
    }
  } else {
    base = `${agent}:${segment(p.channel ?? '', 'channel')}:${p.chatType}:${segment(p.groupId ?? '', 'groupId')}`;
  }
  return p.threadId ? `${base}:${p.threadKind ?? 'thread'}:${segment(p.threadId, 'threadId')}` : base;
}

/** Reads a key back. Accepts the legacy `dm` segment as `direct`. Throws SessionKeyError on anything else. */
export function parseSessionKey(input: string): ParsedSessionKey {
  const parts = input.trim().toLowerCase().split(':');
  const fail = (why: string): never => { throw new SessionKeyError(`"${input}" is not a session key: ${why}.`); };
  if (parts[0] !== 'agent' || !parts[1]) fail('it must start with agent:<agentId>:');
  if (parts.length < 3 || parts.some((p) => p === '')) fail('it has a missing or empty segment');
  const at = (i: number) => decode(parts[i] as string);
  const agentId = at(1);
  let parsed: KeyParts;
  let used: number;
  if (parts[2] === 'subagent') {
    if (parts.length !== 4) fail('a sub-agent key is agent:<agentId>:subagent:<id>');
    const sub: KeyParts = { agentId, chatType: 'direct', channel: 'internal', subagentId: at(3) };
    return { key: formatKey(sub), ...sub };
  }
  if (parts[2] === 'job' && parts.length === 4) {
    const job: KeyParts = { agentId, chatType: 'direct', channel: 'internal', jobId: at(3) };
    return { key: formatKey(job), ...job };
  }
  if (parts[2] === 'main') {
    parsed = { agentId, chatType: 'direct', dmScope: 'main' };
    used = 3;
  } else if (DIRECT.has(parts[2] as string)) {
    if (parts.length < 4) fail('a per-peer key needs a peer id');
    parsed = { agentId, chatType: 'direct', dmScope: 'per-peer', peerId: at(3) };
    used = 4;
  } else {
    if (parts.length < 5) fail('too few segments');
    const channel = at(2);
    const kind = parts[3] as string;
    if (DIRECT.has(kind)) {
      parsed = { agentId, chatType: 'direct', dmScope: 'per-channel-peer', channel, peerId: at(4) };
      used = 5;
    } else if (kind === 'group' || kind === 'channel') {
      parsed = { agentId, chatType: kind, channel, groupId: at(4) };
      used = 5;
    } else {
      if (parts.length < 6 || !DIRECT.has(parts[4] as string)) fail('expected direct, group or channel after the channel');
      parsed = { agentId, chatType: 'direct', dmScope: 'per-account-channel-peer', channel, accountId: kind && at(3), peerId: at(5) };
      used = 6;
    }
  }
  const rest = parts.slice(used);
  if (rest.length === 0) return { key: formatKey(parsed), ...parsed };
  if (rest.length !== 2 || (rest[0] !== 'thread' && rest[0] !== 'topic')) fail('only :thread:<id> or :topic:<id> may follow');
  const withThread: KeyParts = { ...parsed, threadKind: rest[0] as 'thread' | 'topic', threadId: decode(rest[1] as string) };
  return { key: formatKey(withThread), ...withThread, parentKey: formatKey(parsed) };
}

/** The parent key of a thread key, or the key itself. */
export function parentSessionKey(key: string): string {
  const parsed = parseSessionKey(key);
  return parsed.parentKey ?? parsed.key;
}

/** Replaces a peer id by its identity-link name (ignored under `main`). */
export function linkedPeer(channel: string, peerId: string, options: SessionKeyOptions): string {
  if (options.dmScope === 'main') return peerId;
  const wanted = `${channel}:${peerId}`.toLowerCase();
  for (const [canonical, ids] of Object.entries(options.identityLinks)) {
    if (ids.some((id) => id.toLowerCase() === wanted)) return canonical;
  }
  return peerId;
}

const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function segment(value: string, name: string): string {
  const text = String(value).trim().toLowerCase();
  if (!text) throw new SessionKeyError(`The ${name} of a session key cannot be empty.`);
  // Control characters are encoded too, and an unpaired surrogate becomes U+FFFD: a key is stored as text
  // (PostgreSQL refuses NUL and unpaired surrogates) and written into logs.
  return text.replace(UNPAIRED_SURROGATE, '\ufffd').replace(/[%:\s\u0000-\u001f\u007f]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

function decode(value: string): string {
  return value.replace(/%([0-9a-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}
