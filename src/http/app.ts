import { randomUUID } from 'node:crypto';
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { bearerAuth } from 'hono/bearer-auth';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { requestId } from 'hono/request-id';
import { ConfigError } from '../core/errors.ts';
import type { HttpRoute } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import { errorResponse, jsonError } from './http-error.ts';
import { sameOriginGuard } from './same-origin.ts';

/** Variables set per request. */
export interface HttpVariables {
  correlationId: string;
  /** Set by Hono's requestId middleware; the same value as `correlationId`. */
  requestId: string;
}

export type HttpApp = Hono<{ Variables: HttpVariables }>;

/** Options of {@link createHttpApp}. */
export interface HttpAppOptions {
  authToken: string;
  maxBodyBytes: number;
  logger: Logger;
  /** Route groups mounted in order (admin API, OpenAI API, dashboard...). */
  mounts: ((app: HttpApp) => void)[];
  /** Routes served by channels (webhooks, the web chat). */
  channelRoutes: HttpRoute[];
  /** `gateway.host` and `gateway.allowedHosts`: the names `Host` may carry when there is no token (same-origin protection). */
  host?: string;
  allowedHosts?: readonly string[];
  /**
   * With a token: lets browsers in by the dashboard's session cookie (`dashboard-auth.ts`). `'allow'` for its
   * public routes and signed-in requests, a response to refuse one, undefined to leave it to the bearer check.
   */
  browserAuth?: (c: Context) => 'allow' | Response | undefined;
  /**
   * Body limits of single routes, by exact path, instead of `maxBodyBytes` (the routes that take media:
   * `mediaBodyLimits` of `media-upload.ts`). Checked like the others: `Content-Length` first, so a body over the
   * limit is refused before it is read.
   */
  bodyLimits?: Readonly<Record<string, number>>;
}

/** Characters a bearer token may have (RFC 6750 b64token), as Hono's bearerAuth checks them. */
const TOKEN_CHARS = /^[A-Za-z0-9._~+/-]+=*$/;

/** Correlation id of a request: `X-Request-Id` or `X-Trace-Id` when sane, else a new UUID. */
export function requestCorrelationId(headers: Headers): string {
  const given = headers.get('x-request-id') ?? headers.get('x-trace-id');
  return given && /^[\w=-]{1,128}$/.test(given) ? given : randomUUID();
}

/** The error code of a JSON error answer, for the log line of a refused request. */
async function errorCodeOf(response: Response): Promise<string | undefined> {
  if (!(response.headers.get('content-type') ?? '').includes('json')) return undefined;
  try {
    return ((await response.clone().json()) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

/** The Hono app: correlation ids, bearer auth, body limit, JSON errors, then the mounted routes. */
export function createHttpApp(options: HttpAppOptions): HttpApp {
  const app: HttpApp = new Hono<{ Variables: HttpVariables }>();
  // X-Request-Id (else X-Trace-Id, else a new UUID) is the correlation id, echoed as X-Correlation-Id.
  app.use('*', requestId({ limitLength: 128, generator: (c) => requestCorrelationId(new Headers({ 'x-trace-id': c.req.header('x-trace-id') ?? '' })) }));
  app.use('*', async (c, next) => {
    const correlationId = c.get('requestId');
    c.set('correlationId', correlationId);
    await next();
    c.res.headers.set('X-Correlation-Id', correlationId);
    if (c.res.status >= 400 && c.res.status < 500 && c.res.status !== 404) {
      // One line per refused request (auth, size, bad input, rate); never the query string or the body.
      options.logger.info({ correlationId, method: c.req.method, path: c.req.path, status: c.res.status, code: await errorCodeOf(c.res) }, 'HTTP request refused');
    }
  });
  app.get('/healthz', (c) => c.json({ ok: true }));
  if (options.authToken) {
    if (!TOKEN_CHARS.test(options.authToken)) {
      throw new ConfigError('gateway.authToken (SWITCHBOARD_AUTH_TOKEN) may only hold A-Z a-z 0-9 . _ ~ + / - (and = at the end), so that clients can send it as a bearer token.');
    }
    const refuse = (c: Context) => jsonError(c, 401, 'Missing or wrong bearer token: send Authorization: Bearer <gateway.authToken>.', 'unauthorized');
    const auth = bearerAuth<{ Variables: HttpVariables }>({
      token: options.authToken, noAuthenticationHeader: { message: refuse }, invalidAuthenticationHeader: { message: refuse }, invalidToken: { message: refuse },
    });
    // Platforms sign their own webhook requests.
    const guard: MiddlewareHandler<{ Variables: HttpVariables }> = async (c, next) => {
      if (c.req.path.startsWith('/webhooks/')) return next();
      const browser = options.browserAuth?.(c);
      return browser === 'allow' ? next() : browser ?? auth(c, next);
    };
    app.use('*', guard);
  } else {
    // No token: only this gateway's own names and pages (DNS rebinding, cross-site requests).
    app.use('*', sameOriginGuard({ host: options.host ?? '127.0.0.1', allowedHosts: options.allowedHosts ?? [] }));
  }
  const defaultLimit: MiddlewareHandler<{ Variables: HttpVariables }> = bodyLimit({
    maxSize: options.maxBodyBytes,
    onError: (c) => jsonError(c, 413, `The request body is larger than gateway.maxBodyBytes (${options.maxBodyBytes} bytes).`, 'body_too_large'),
  });
  const routeLimits = new Map<string, MiddlewareHandler<{ Variables: HttpVariables }>>(Object.entries(options.bodyLimits ?? {}).map(([route, maxSize]) => [route, bodyLimit({
    maxSize,
    onError: (c) => jsonError(c, 413, `The request body is larger than this route takes (${maxSize} bytes: its attachments at media.maxBytes each, base64-encoded).`, 'body_too_large'),
  })]));
  const limitBody: MiddlewareHandler<{ Variables: HttpVariables }> = (c, next) => (routeLimits.get(c.req.path) ?? defaultLimit)(c, next);
  app.use('*', limitBody);
  for (const mount of options.mounts) mount(app);
  for (const route of options.channelRoutes) {
    const handler = (c: Context<{ Variables: HttpVariables }>) => route.handle(c.req.raw, c.req.param(), { correlationId: c.get('correlationId') });
    if (route.method === 'GET') app.get(route.path, handler);
    else app.post(route.path, handler);
  }
  app.notFound((c) => jsonError(c, 404, `No route ${c.req.method} ${c.req.path}.`, 'not_found'));
  app.onError((error, c) => {
    if (error instanceof HTTPException) return error.getResponse();
    const status = (error as { status?: number }).status;
    if (status && status < 500) return errorResponse(c, error);
    options.logger.error({ err: error, correlationId: c.get('correlationId'), path: c.req.path }, 'HTTP handler failed');
    return errorResponse(c, error);
  });
  return app;
}
