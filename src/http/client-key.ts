import { createHash } from 'node:crypto';
import type { Context } from 'hono';

/**
 * Who is calling, for `limits.perSender` (SPEC §14). Without `gateway.authToken` a bearer is never checked, so it
 * is ignored (else a new random one per request would get a fresh bucket each time): the key is the client's
 * address. With it, a caller sending the gateway's token is `token:<hash>@<address>` (hashed, so no secret sits
 * in memory or logs); one signed in another way (the dashboard's cookie) is its address. The API and the web chat
 * key on it.
 */
export function httpClientKey(c: Context, authToken: string | undefined): string {
  const address = clientAddress(c);
  const token = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1];
  if (!authToken || token !== authToken) return address;
  return `token:${createHash('sha256').update(token).digest('hex').slice(0, 32)}@${address}`;
}

/** The caller's address, as the socket sees it (a proxy's own address behind one). */
export function clientAddress(c: Context): string {
  const incoming = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming;
  return incoming?.socket?.remoteAddress ?? 'unknown';
}
