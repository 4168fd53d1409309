import { createHash } from 'node:crypto';

/** Discord accepts a nonce of at most 25 characters. */
export const NONCE_LENGTH = 25;

/**
 * The nonce of one chunk of one reply, the same when the same reply is sent again (a replay after a crash
 * between Discord's acceptance and the journal line). Sent with `enforce_nonce`, Discord then answers with
 * the message it already created instead of posting it twice (it remembers nonces for a few minutes).
 *
 * With the reply's `idempotencyKey` (`<delivery key>:<reply index>`, set by the gateway) the nonce comes from
 * it and the chunk's index: two equal replies of one turn, or equal replies to different messages, get
 * different nonces and are both posted. Without it (a reply the gateway did not key) the reply's text stands
 * for its index, with the id of the message answered: the same text sent twice in answer to one message
 * within minutes is then posted once. Without either there is no nonce.
 */
export function discordNonce(sourceId: string | undefined, replyText: string, chunkIndex: number, idempotencyKey?: string): string | undefined {
  const seed = idempotencyKey ? `key\u0000${idempotencyKey}\u0000${chunkIndex}` : sourceId ? `${sourceId}\u0000${chunkIndex}\u0000${replyText}` : undefined;
  if (seed === undefined) return undefined;
  return createHash('sha256').update(seed).digest('base64url').slice(0, NONCE_LENGTH);
}
