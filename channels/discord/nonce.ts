import { createHash } from 'node:crypto';

/** Discord accepts a nonce of at most 25 characters. */
export const NONCE_LENGTH = 25;

/**
 * The nonce of one chunk of one reply: derived from the id of the message answered (the source), the
 * reply's text and the chunk's index, so that sending the same reply again (a replay after a crash between
 * Discord's acceptance and the journal line) carries the same nonces. Sent with `enforce_nonce`, Discord
 * then answers with the message it already created instead of posting it twice (it remembers nonces for
 * a few minutes). The reply's text stands for its index among the turn's replies, which the adapter is not
 * told: two different replies to one message never share a nonce; the same text sent twice in answer to
 * one message within minutes is posted once. Without a source (nothing answered) there is no nonce.
 */
export function discordNonce(sourceId: string | undefined, replyText: string, chunkIndex: number): string | undefined {
  if (!sourceId) return undefined;
  const digest = createHash('sha256').update(`${sourceId}\u0000${chunkIndex}\u0000${replyText}`).digest('base64url');
  return digest.slice(0, NONCE_LENGTH);
}
