import { DiscordAPIError, HTTPError, RateLimitError } from 'discord.js';
import { isNetworkError, type RetryVerdict } from '../../src/core/delivery-retry.ts';

/**
 * Why a Discord REST call may pass when tried again: a connection that broke or timed out, a 5xx (after
 * discord.js's own immediate retries), a rate limit discord.js handed back. A 4xx refusal (missing access,
 * unknown channel, invalid form body) is final. Sends carry a nonce with `enforce_nonce`, so a retry of a
 * message Discord did create is answered with that message, not posted twice.
 */
export function discordRetryVerdict(error: unknown): RetryVerdict {
  if (error instanceof RateLimitError) return { reason: 'rate limited', retryAfterMs: Math.max(0, error.retryAfter) };
  if (error instanceof DiscordAPIError) {
    if (error.status === 429) return { reason: 'rate limited (429)' };
    return error.status >= 500 ? { reason: `Discord answered ${error.status}` } : undefined;
  }
  if (error instanceof HTTPError) return error.status >= 500 || error.status === 429 ? { reason: `Discord answered ${error.status}` } : undefined;
  if (error instanceof Error && error.name === 'AbortError') return { reason: 'the request timed out' };
  return isNetworkError(error) ? { reason: `network: ${(error as Error).message}` } : undefined;
}
