import { randomUUID, timingSafeEqual } from 'node:crypto';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { HttpRoute } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import { errorResponse, jsonError } from './http-error.ts';

/** Variables set per request. */
export interface HttpVariables {
  correlationId: string;
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
}

/** Correlation id of a request: `X-Request-Id` or `X-Trace-Id` when sane, else a new UUID. */
export function requestCorrelationId(headers: Headers): string {
  const given = headers.get('x-request-id') ?? headers.get('x-trace-id');
  return given && /^[\w.:\-]{1,128}$/.test(given) ? given : randomUUID();
}

/** The Hono app: correlation ids, bearer auth, body limit, JSON errors, then the mounted routes. */
export function createHttpApp(options: HttpAppOptions): HttpApp {
  const app: HttpApp = new Hono<{ Variables: HttpVariables }>();
  app.use('*', async (c, next) => {
    const correlationId = requestCorrelationId(c.req.raw.headers);
    c.set('correlationId', correlationId);
    await next();
    c.res.headers.set('X-Correlation-Id', correlationId);
  });
  app.get('/healthz', (c) => c.json({ ok: true }));
  if (options.authToken) {
    const expected = Buffer.from(options.authToken);
    app.use('*', async (c, next) => {
      if (c.req.path.startsWith('/webhooks/')) return next(); // platforms sign their own requests
      const header = c.req.header('authorization') ?? '';
      const m = /^Bearer\s+(.+)$/i.exec(header);
      const given = Buffer.from(m?.[1]?.trim() ?? '');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        return jsonError(c, 401, 'Missing or wrong bearer token: send Authorization: Bearer <gateway.authToken>.', 'unauthorized');
      }
      return next();
    });
  }
  app.use('*', bodyLimit({
    maxSize: options.maxBodyBytes,
    onError: (c) => jsonError(c, 413, `The request body is larger than gateway.maxBodyBytes (${options.maxBodyBytes} bytes).`, 'body_too_large'),
  }));
  for (const mount of options.mounts) mount(app);
  for (const route of options.channelRoutes) {
    const handler = (c: Context<{ Variables: HttpVariables }>) => route.handle(c.req.raw, c.req.param() as Record<string, string>, { correlationId: c.get('correlationId') });
    if (route.method === 'GET') app.get(route.path, handler);
    else app.post(route.path, handler);
  }
  app.notFound((c) => jsonError(c, 404, `No route ${c.req.method} ${c.req.path}.`, 'not_found'));
  app.onError((error, c) => {
    const status = (error as { status?: number }).status;
    if (status && status < 500) return errorResponse(c, error);
    options.logger.error({ err: error, correlationId: c.get('correlationId'), path: c.req.path }, 'HTTP handler failed');
    return errorResponse(c, error);
  });
  return app;
}
