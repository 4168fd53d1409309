import { timingSafeEqual } from 'node:crypto';
import type { HttpRoute } from '../../src/core/channel-adapter.ts';

/** The header Telegram sends with the `secret_token` given to `setWebhook`. */
export const SECRET_HEADER = 'x-telegram-bot-api-secret-token';

/** The gateway path of an account's webhook. */
export function webhookPath(accountId: string): string {
  return `/webhooks/telegram/${accountId}`;
}

const fail = (status: number, message: string, code: string) => new Response(
  JSON.stringify({ error: { message, type: status === 401 ? 'authentication_error' : status < 500 ? 'invalid_request_error' : 'server_error', code } }),
  { status, headers: { 'content-type': 'application/json' } },
);

/** True when the request carries the secret (constant-time comparison). */
export function hasSecret(request: Request, secret: string): boolean {
  const given = Buffer.from(request.headers.get(SECRET_HEADER) ?? '');
  const expected = Buffer.from(secret);
  return secret.length > 0 && given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * `POST /webhooks/telegram/<accountId>`: refuses (401) a request without the right
 * `X-Telegram-Bot-Api-Secret-Token` before reading it; `handler` gets the rest (grammy's webhook callback).
 * 503 while the channel is not running, so that Telegram delivers the update again later.
 */
export function telegramWebhookRoute(options: {
  accountId: string;
  secret: () => string;
  handler: () => ((request: Request) => Promise<Response>) | undefined;
  onError: (error: unknown, correlationId: string) => Response;
  /** An authentic request whose body is not a Telegram update (answered 400). */
  onMalformed?: (reason: string, correlationId: string) => void;
}): HttpRoute {
  return {
    method: 'POST',
    path: webhookPath(options.accountId),
    async handle(request, _params, context) {
      if (!hasSecret(request, options.secret())) {
        return fail(401, 'Missing or wrong X-Telegram-Bot-Api-Secret-Token: pass channels.telegram.webhookSecret as secret_token to setWebhook.', 'unauthorized');
      }
      const handler = options.handler();
      if (!handler) return fail(503, 'The Telegram channel is not running.', 'channel_stopped');
      // Signed by the secret but not an update (`null`, a list, no update_id): 400 and a log line, never a 5xx.
      const body = await request.text();
      const problem = updateProblem(body);
      if (problem) {
        options.onMalformed?.(problem, context.correlationId);
        return fail(400, `The webhook body is not a Telegram update: ${problem}.`, problem === 'not JSON' ? 'invalid_json' : 'invalid_update');
      }
      try {
        return await handler(new Request(request.url, { method: 'POST', headers: request.headers, body, signal: request.signal }));
      } catch (error) {
        if (error instanceof SyntaxError) return fail(400, 'The webhook body is not a JSON Telegram update.', 'invalid_json');
        return options.onError(error, context.correlationId);
      }
    },
  };
}

/** Why a webhook body is not a Telegram update, or undefined when it is one (an object with an integer `update_id`). */
export function updateProblem(body: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return 'not JSON';
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `${value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value}, not an object`;
  const id = (value as { update_id?: unknown }).update_id;
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) return 'no integer update_id';
  return undefined;
}

/** The JSON error answer of the route, for the adapter's error handler. */
export const webhookFailure = fail;
