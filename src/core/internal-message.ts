import { randomUUID } from 'node:crypto';
import type { InboundMessage, InternalRoute } from './message.ts';

/** A message on channel `internal` (session tools, sub-agent results, background runs) for `route.sessionKey`. */
export function internalMessage(route: InternalRoute, text: string, receivedAt: number): InboundMessage {
  const from = route.fromKey ?? 'switchboard';
  return {
    id: randomUUID(), channel: 'internal', accountId: 'default', chatType: 'direct', chatId: route.sessionKey, peerId: from,
    sender: { id: from, name: route.kind }, text, attachments: [], mentionsBot: true, receivedAt, internal: route,
  };
}
