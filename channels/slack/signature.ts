import { createHmac, timingSafeEqual } from 'node:crypto';

/** How far a request timestamp may be from now (Slack's rule: 5 minutes). */
export const SLACK_MAX_SKEW_SECONDS = 5 * 60;

/** Why a request was refused, or `ok`. */
export type SignatureCheck = { ok: true } | { ok: false; reason: 'missing headers' | 'stale timestamp' | 'bad signature' };

/**
 * Verifies Slack's v0 request signature: `v0=` + hex HMAC-SHA256 of `v0:<timestamp>:<raw body>` with the
 * signing secret, compared in constant time, and a timestamp within 5 minutes of `nowMs` (either side,
 * which bolt's own check does not do for future times).
 */
export function verifySlackSignature(input: {
  signingSecret: string;
  rawBody: string;
  timestamp: string | null;
  signature: string | null;
  nowMs: number;
}): SignatureCheck {
  const { signingSecret, rawBody, timestamp, signature } = input;
  if (!signingSecret || !timestamp || !signature || !/^\d+$/.test(timestamp)) return { ok: false, reason: 'missing headers' };
  if (Math.abs(Math.floor(input.nowMs / 1000) - Number(timestamp)) > SLACK_MAX_SKEW_SECONDS) return { ok: false, reason: 'stale timestamp' };
  const expected = Buffer.from(signSlackRequest(signingSecret, timestamp, rawBody));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: 'bad signature' };
  return { ok: true };
}

/** The `X-Slack-Signature` value of a body (`v0=<hex>`). */
export function signSlackRequest(signingSecret: string, timestamp: string, rawBody: string): string {
  return `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${rawBody}`).digest('hex')}`;
}
