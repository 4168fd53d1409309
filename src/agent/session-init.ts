import { randomUUID } from 'node:crypto';
import type { InboundMessage } from '../core/message.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import { emptyTokens } from '../sessions/entry.ts';
import type { ActiveSession, SessionInit } from '../sessions/manager.ts';

/** What a new session entry for this message and key starts from. */
export function sessionInitOf(message: InboundMessage, key: string): SessionInit {
  const parsed = parseSessionKey(key);
  return {
    key,
    agentId: parsed.agentId,
    channel: message.channel,
    accountId: message.accountId,
    chatType: message.chatType,
    peerId: message.chatType === 'direct' ? message.peerId : undefined,
    groupId: message.groupId,
    threadId: parsed.threadId,
    parentKey: parsed.parentKey,
    displayName: message.chatType === 'direct' ? message.sender.name : undefined,
    ...(message.containerIds?.length ? { containerIds: message.containerIds } : {}),
  };
}

/** A one-off session (API calls without a session key): never stored. */
export function ephemeralSessionOf(init: SessionInit, now: number): ActiveSession {
  return {
    key: init.key,
    holds: 1,
    entry: {
      ...init, sessionId: randomUUID(), createdAt: now, updatedAt: now, sessionStartedAt: now, state: 'active', runState: 'idle',
      overrides: {}, tokens: emptyTokens(), contextTokens: 0, compactionCount: 0, messageCount: 0,
    },
  };
}
