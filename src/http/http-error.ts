import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { SwitchboardError } from '../core/errors.ts';

const TYPES: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error',
  409: 'conflict_error', 413: 'request_too_large', 429: 'rate_limit_error', 499: 'request_cancelled', 500: 'server_error', 502: 'upstream_error', 503: 'service_unavailable',
};

/** The error body of every route (SPEC §7), which is also OpenAI's error shape. */
export function errorBody(status: number, message: string, code: string): { error: { message: string; type: string; code: string } } {
  return { error: { message, type: TYPES[status] ?? 'server_error', code } };
}

export function jsonError(c: Context, status: number, message: string, code: string): Response {
  return c.json(errorBody(status, message, code), status as ContentfulStatusCode);
}

/** Maps any thrown value to the error response; internals never leak beyond a generic message. */
export function errorResponse(c: Context, error: unknown): Response {
  if (error instanceof SwitchboardError) {
    const status = error.status >= 400 && error.status < 600 ? error.status : 500;
    return jsonError(c, status, error.message, error.code.toLowerCase());
  }
  return jsonError(c, 500, 'Internal error; see the gateway log for the correlation id.', 'internal_error');
}

/** Reads a JSON body; a malformed one is a 400 that says so. */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (!text.trim()) throw new SwitchboardError('invalid_json', 'The request body is empty; send a JSON object.', { status: 400 });
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new SwitchboardError('invalid_json', `The request body is not valid JSON: ${(error as Error).message}`, { status: 400 });
  }
}
