import { webApi } from '@slack/bolt';
import type { RetryVerdict } from '../../src/core/delivery-retry.ts';

/** Platform errors of Slack that mean "not now" rather than "no". */
const TRANSIENT_PLATFORM_ERRORS = new Set(['ratelimited', 'internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

/**
 * Why a Slack Web API call may pass when tried again: the request never got an answer (reset, refused,
 * timed out), Slack answered 5xx, or rate-limited it (after its `Retry-After`). Any other platform error
 * (`channel_not_found`, `not_in_channel`, `msg_too_long`, …) is final.
 */
export function slackRetryVerdict(error: unknown): RetryVerdict {
  const e = error as { code?: string; statusCode?: number; retryAfter?: number; data?: { error?: string } } | undefined;
  switch (e?.code) {
    case webApi.ErrorCode.RequestError: return { reason: 'the request got no answer' };
    case webApi.ErrorCode.HTTPError: return (e.statusCode ?? 0) >= 500 || e.statusCode === 429 ? { reason: `Slack answered ${e.statusCode}` } : undefined;
    case webApi.ErrorCode.RateLimitedError: return { reason: 'rate limited', retryAfterMs: Math.max(0, Number(e.retryAfter ?? 1)) * 1000 };
    case webApi.ErrorCode.PlatformError: return TRANSIENT_PLATFORM_ERRORS.has(e.data?.error ?? '') ? { reason: `Slack answered ${e.data?.error}` } : undefined;
    default: return undefined;
  }
}
