import { createHmac } from 'node:crypto';
import { verifySlackRequest } from '@slack/bolt';

/** How far a request timestamp may be from now (Slack's rule: 5 minutes). */
export const SLACK_MAX_SKEW_SECONDS = 5 * 60;

/** Why a request was refused, or `ok`. */
export type SignatureCheck = { ok: true } | { ok: false; reason: 'missing headers' | 'stale timestamp' | 'bad signature' };

/**
 * Verifies Slack's v0 request signature with bolt's own check (`verifySlackRequest`: HMAC-SHA256 of
 * `v0:<timestamp>:<raw body>`, compared in constant time, and a timestamp no older than 5 minutes), and
 * also refuses a timestamp more than 5 minutes ahead of `nowMs`, which bolt lets through.
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
  if (Number(timestamp) - Math.floor(input.nowMs / 1000) > SLACK_MAX_SKEW_SECONDS) return { ok: false, reason: 'stale timestamp' };
  try {
    verifySlackRequest({ signingSecret, body: rawBody, headers: { 'x-slack-signature': signature, 'x-slack-request-timestamp': Number(timestamp) }, nowMilliseconds: input.nowMs });
  } catch (error) {
    return { ok: false, reason: /stale/.test((error as Error).message) ? 'stale timestamp' : 'bad signature' };
  }
  return { ok: true };
}

/** The `X-Slack-Signature` value of a body (`v0=<hex>`). */
export function signSlackRequest(signingSecret: string, timestamp: string, rawBody: string): string {
  return `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${rawBody}`).digest('hex')}`;
}
