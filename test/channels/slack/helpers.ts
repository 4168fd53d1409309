import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../../src/core/logger.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { slackSignedHeaders } from '../../fakes/fake-slack.ts';

export const SIGNING_SECRET = 'slack-signing-secret-test';
export const BOT_TOKEN = 'xoxb-test-bot-token';
export const APP_TOKEN = 'xapp-1-test-app-token';

/** POSTs a signed body to the gateway's Slack webhook of `accountId`. */
export function postSlack(gw: RunningGateway, body: unknown, options: { accountId?: string; headers?: Record<string, string>; timestampSec?: number; secret?: string } = {}): Promise<Response> {
  const raw = JSON.stringify(body);
  return fetch(`${gw.url}/webhooks/slack/${options.accountId ?? 'default'}`, {
    method: 'POST',
    headers: { ...slackSignedHeaders(options.secret ?? SIGNING_SECRET, raw, options.timestampSec), ...options.headers },
    body: raw,
  });
}

/** The session keys `GET /admin/sessions` lists. */
export async function sessionKeys(gw: RunningGateway): Promise<string[]> {
  const body = (await (await fetch(`${gw.url}/admin/sessions`)).json()) as { sessions: { key: string }[] };
  return body.sessions.map((s) => s.key).sort();
}

/** Waits (bounded poll) until `check` is true. */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A logger that keeps its JSON lines, scrubbing the given secrets like the real one. */
export function capturingLogger(secrets: string[] = []): { logger: Logger; lines: () => Record<string, unknown>[] } {
  const raw: string[] = [];
  const destination = new Writable({ write(chunk, _encoding, callback) { raw.push(String(chunk)); callback(); } });
  const logger = createLogger({ level: 'info', destination, secrets });
  return { logger, lines: () => raw.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>) };
}
