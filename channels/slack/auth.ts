import { webApi, type Logger as BoltLogger } from '@slack/bolt';
import { ChannelError } from '../../src/core/errors.ts';
import type { SlackBotIdentity } from './normalize.ts';

const AUTH_ERRORS = new Set(['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired', 'not_allowed_token_type', 'missing_scope']);

/** One short line about a Web API failure: the Slack error code, the HTTP status or the network error (never a token). */
export function describeSlackError(error: unknown): string {
  const e = error as { code?: string; data?: { error?: string }; statusCode?: number; original?: Error & { cause?: { code?: string; message?: string } }; name?: string; message?: string };
  switch (e?.code) {
    case webApi.ErrorCode.PlatformError: return e.data?.error ?? 'platform error';
    case webApi.ErrorCode.HTTPError: return `HTTP ${e.statusCode ?? '?'}`;
    case webApi.ErrorCode.RateLimitedError: return 'rate limited';
    case webApi.ErrorCode.RequestError: {
      const original = e.original;
      if (original?.name === 'TimeoutError' || original?.name === 'AbortError') return 'timed out';
      return original?.cause?.code ?? original?.cause?.message ?? original?.message ?? 'request failed';
    }
    default: return e?.message ?? String(error);
  }
}

/** True when Slack refused the token itself (as opposed to a network problem). */
export function isSlackAuthError(error: unknown): boolean {
  const e = error as { code?: string; data?: { error?: string } };
  return e?.code === webApi.ErrorCode.PlatformError && AUTH_ERRORS.has(e.data?.error ?? '');
}

/**
 * `auth.test` with no retries and a timeout, so start-up never hangs on an unreachable API (bolt's own
 * check retries for about 30 minutes). Resolves with the bot's identity; rejects with one clear line.
 */
export async function checkBotToken(options: { token: string; apiUrl: string; accountId: string; timeoutMs: number; logger: BoltLogger }): Promise<SlackBotIdentity> {
  const client = new webApi.WebClient(options.token, {
    ...(options.apiUrl ? { slackApiUrl: options.apiUrl } : {}),
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    timeout: options.timeoutMs,
    // The failure becomes the one line the caller logs; the client's own warnings would repeat it.
    logger: { ...options.logger, warn: (...args: unknown[]) => options.logger.debug(...args), error: (...args: unknown[]) => options.logger.debug(...args) },
  });
  const where = options.apiUrl || 'https://slack.com/api/';
  try {
    const result = await client.auth.test();
    if (!result.user_id) throw new ChannelError('SLACK_AUTH_FAILED', `Slack account "${options.accountId}": auth.test returned no bot user; use a bot token (xoxb-…) as SLACK_BOT_TOKEN.`);
    return { userId: result.user_id, botId: result.bot_id, teamId: result.team_id };
  } catch (error) {
    if (error instanceof ChannelError) throw error;
    if (isSlackAuthError(error)) {
      throw new ChannelError('SLACK_AUTH_FAILED', `Slack account "${options.accountId}": the bot token was refused (${describeSlackError(error)}); check SLACK_BOT_TOKEN (xoxb-…) and that the app is installed.`, error);
    }
    throw new ChannelError('SLACK_UNREACHABLE', `Slack account "${options.accountId}": cannot reach the Slack API at ${where} (${describeSlackError(error)}); check the network or SLACK_API_URL.`, error);
  }
}
