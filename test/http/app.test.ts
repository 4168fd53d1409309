import { HTTPException } from 'hono/http-exception';
import { describe, expect, it } from 'vitest';
import { BadRequestError, ConfigError, SwitchboardError } from '../../src/core/errors.ts';
import type { Logger } from '../../src/core/logger.ts';
import { createHttpApp, requestCorrelationId, type HttpApp, type HttpAppOptions } from '../../src/http/app.ts';

const TOKEN = 'app-test-token';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A logger that keeps what the app logs (the app only calls info and error). */
function recordingLogger() {
  const info: [Record<string, unknown>, string][] = [];
  const error: [Record<string, unknown>, string][] = [];
  const logger = { info: (o: Record<string, unknown>, m: string) => info.push([o, m]), error: (o: Record<string, unknown>, m: string) => error.push([o, m]) } as unknown as Logger;
  return { logger, info, error };
}

/** The real app with a few routes of our own, one per kind of answer. */
function app(over: Partial<HttpAppOptions> = {}) {
  const logs = recordingLogger();
  const mount = (a: HttpApp) => {
    a.get('/echo', (c) => c.json({ correlationId: c.get('correlationId') }));
    a.get('/bad', () => { throw new BadRequestError('That is not right.', 'bad_thing'); });
    a.get('/boom', () => { throw new Error('internal detail'); });
    a.get('/teapot', () => { throw new HTTPException(418, { message: 'short and stout' }); });
    a.get('/unavailable', () => { throw new SwitchboardError('SHUTTING_DOWN', 'Later.', { status: 503 }); });
    a.get('/store-failed', () => { throw new SwitchboardError('STORE_FAILED', 'The store failed.', { status: 500 }); });
    a.get('/plain-400', (c) => c.text('no', 400));
    a.post('/upload', async (c) => c.json({ size: (await c.req.text()).length }));
  };
  const channelRoutes: HttpAppOptions['channelRoutes'] = [
    { method: 'POST', path: '/webhooks/test/:accountId', handle: async (_r, params, ctx) => Response.json({ params, correlationId: ctx.correlationId }) },
    { method: 'GET', path: '/channel/:name', handle: async (_r, params) => Response.json({ params }) },
  ];
  const a = createHttpApp({ authToken: TOKEN, maxBodyBytes: 16, logger: logs.logger, mounts: [mount], channelRoutes, ...over });
  return { app: a, ...logs };
}

const auth = { authorization: `Bearer ${TOKEN}` };

describe('createHttpApp: correlation ids', () => {
  it('X-Request-Id is the correlation id, echoed as X-Correlation-Id and given to the routes', async () => {
    const { app: a } = app();
    const response = await a.request('/echo', { headers: { ...auth, 'x-request-id': 'req-1' } });
    expect(response.headers.get('x-correlation-id')).toBe('req-1');
    expect(await response.json()).toEqual({ correlationId: 'req-1' });
  });

  it('X-Trace-Id is used when there is no X-Request-Id; X-Request-Id wins over it', async () => {
    const { app: a } = app();
    expect((await a.request('/echo', { headers: { ...auth, 'x-trace-id': 'trace-7' } })).headers.get('x-correlation-id')).toBe('trace-7');
    expect((await a.request('/echo', { headers: { ...auth, 'x-trace-id': 'trace-7', 'x-request-id': 'req-8' } })).headers.get('x-correlation-id')).toBe('req-8');
  });

  it('without either, or with an insane one, a new UUID', async () => {
    const { app: a } = app();
    const ids = [];
    const cases: Record<string, string>[] = [{}, { 'x-trace-id': 'has space' }, { 'x-trace-id': 'x'.repeat(129) }, { 'x-trace-id': 'semi;colon' }];
    for (const headers of cases) {
      const id = (await a.request('/echo', { headers: { ...auth, ...headers } })).headers.get('x-correlation-id');
      expect(id).toMatch(UUID);
      ids.push(id);
    }
    expect(new Set(ids).size).toBe(4);
    expect((await a.request('/echo', { headers: { ...auth, 'x-trace-id': 'A-z_0=9' } })).headers.get('x-correlation-id')).toBe('A-z_0=9');
    expect((await a.request('/echo', { headers: { ...auth, 'x-trace-id': 'x'.repeat(128) } })).headers.get('x-correlation-id')).toBe('x'.repeat(128));
  });

  it('requestCorrelationId: request id, else trace id, when 1 to 128 of [A-Za-z0-9_=-]', () => {
    expect(requestCorrelationId(new Headers({ 'x-request-id': 'a', 'x-trace-id': 'b' }))).toBe('a');
    expect(requestCorrelationId(new Headers({ 'x-trace-id': 'b' }))).toBe('b');
    expect(requestCorrelationId(new Headers({ 'x-request-id': 'bad id', 'x-trace-id': 'b' }))).toMatch(UUID);
    expect(requestCorrelationId(new Headers({ 'x-request-id': '' }))).toMatch(UUID);
    expect(requestCorrelationId(new Headers({ 'x-request-id': 'é' }))).toMatch(UUID);
    expect(requestCorrelationId(new Headers())).toMatch(UUID);
  });
});

describe('createHttpApp: auth', () => {
  it('/healthz answers without a token; everything else needs it', async () => {
    const { app: a } = app();
    const health = await a.request('/healthz');
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ ok: true });
    const refused = await a.request('/echo');
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({ error: { message: 'Missing or wrong bearer token: send Authorization: Bearer <gateway.authToken>.', type: 'authentication_error', code: 'unauthorized' } });
    expect((await a.request('/echo', { headers: { authorization: TOKEN } })).status).toBe(401);
    // A wrong token or a malformed header is refused the same way (JSON, 401), not with the library's own answer.
    for (const authorization of ['Bearer wrong', 'Bearer a b', 'Bearer', 'Basic dXNlcjpwYXNz', `Bearer ${TOKEN}!`]) {
      const response = await a.request('/echo', { headers: { authorization } });
      expect([response.status, ((await response.json()) as { error: { code: string } }).error.code]).toEqual([401, 'unauthorized']);
    }
    expect((await a.request('/echo', { headers: auth })).status).toBe(200);
  });

  it('webhooks are left to the platform signatures: no bearer token needed, params and correlation id passed on', async () => {
    const { app: a } = app();
    const response = await a.request('/webhooks/test/acct-1', { method: 'POST', headers: { 'x-request-id': 'hook-1' }, body: '{}' });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ params: { accountId: 'acct-1' }, correlationId: 'hook-1' });
  });

  it('channel routes are mounted with their own method only', async () => {
    const { app: a } = app();
    expect(await (await a.request('/channel/web', { headers: auth })).json()).toEqual({ params: { name: 'web' } });
    expect((await a.request('/channel/web', { method: 'POST', headers: auth })).status).toBe(404);
    expect((await a.request('/webhooks/test/acct-1', { headers: auth })).status).toBe(404);
  });

  it('browser sign-in decides first: allow lets the request in, a response refuses it, undefined leaves it to the bearer check', async () => {
    const verdicts: (string | undefined)[] = [];
    const browserAuth: HttpAppOptions['browserAuth'] = (c) => {
      const v = c.req.header('x-verdict');
      verdicts.push(v);
      if (v === 'allow') return 'allow';
      if (v === 'refuse') return c.json({ refused: true }, 403);
      return undefined;
    };
    const { app: a } = app({ browserAuth });
    expect((await a.request('/echo', { headers: { 'x-verdict': 'allow' } })).status).toBe(200);
    const refused = await a.request('/echo', { headers: { ...auth, 'x-verdict': 'refuse' } });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({ refused: true });
    expect((await a.request('/echo', { headers: { 'x-verdict': 'none' } })).status).toBe(401);
    expect((await a.request('/echo', { headers: { ...auth, 'x-verdict': 'none' } })).status).toBe(200);
    // Webhooks never reach it.
    await a.request('/webhooks/test/x', { method: 'POST', headers: { 'x-verdict': 'hook' }, body: '{}' });
    expect(verdicts).not.toContain('hook');
  });

  it('a token with characters a bearer token cannot carry is refused at start', () => {
    expect(() => app({ authToken: 'has space' })).toThrow(ConfigError);
    expect(() => app({ authToken: 'has space' })).toThrow('gateway.authToken (SWITCHBOARD_AUTH_TOKEN) may only hold A-Z a-z 0-9 . _ ~ + / - (and = at the end), so that clients can send it as a bearer token.');
    expect(() => app({ authToken: 'abc=def' })).toThrow(ConfigError);
    expect(() => app({ authToken: 'a.b_c~d+e/f-g==' })).not.toThrow();
  });

  it('without a token, requests must name this gateway (127.0.0.1 by default, plus allowedHosts)', async () => {
    const { app: a } = app({ authToken: '' });
    expect((await a.request('/echo', { headers: { host: '127.0.0.1:18789' } })).status).toBe(200);
    expect((await a.request('/echo', { headers: { host: 'evil.example' } })).status).toBe(403);
    const proxied = app({ authToken: '', host: '0.0.0.0', allowedHosts: ['chat.example.org'] }).app;
    expect((await proxied.request('/echo', { headers: { host: 'chat.example.org' } })).status).toBe(200);
    expect((await proxied.request('/echo', { headers: { host: 'evil.example' } })).status).toBe(403);
    const named = app({ authToken: '', host: 'box.lan' }).app;
    expect((await named.request('/echo', { headers: { host: 'box.lan:8080' } })).status).toBe(200);
  });
});

describe('createHttpApp: bodies and errors', () => {
  it('a body over maxBodyBytes is a 413 that says the limit', async () => {
    const { app: a } = app();
    expect(await (await a.request('/upload', { method: 'POST', headers: auth, body: 'x'.repeat(16) })).json()).toEqual({ size: 16 });
    const tooBig = await a.request('/upload', { method: 'POST', headers: auth, body: 'x'.repeat(17) });
    expect(tooBig.status).toBe(413);
    expect(await tooBig.json()).toEqual({ error: { message: 'The request body is larger than gateway.maxBodyBytes (16 bytes).', type: 'request_too_large', code: 'body_too_large' } });
  });

  it('an unknown route is a JSON 404 naming the method and path', async () => {
    const { app: a } = app();
    const response = await a.request('/nowhere?x=1', { method: 'DELETE', headers: auth });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: { message: 'No route DELETE /nowhere.', type: 'not_found_error', code: 'not_found' } });
  });

  it('errors with a 4xx status are answered as they are, without an error log line', async () => {
    const { app: a, error } = app();
    const bad = await a.request('/bad', { headers: auth });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: { message: 'That is not right.', type: 'invalid_request_error', code: 'bad_thing' } });
    const teapot = await a.request('/teapot', { headers: auth });
    expect(teapot.status).toBe(418);
    expect(await teapot.text()).toBe('short and stout');
    expect(error).toEqual([]);
  });

  it('anything else is a 5xx without internals, logged once at error with the correlation id and path', async () => {
    const { app: a, error } = app();
    const boom = await a.request('/boom', { headers: { ...auth, 'x-request-id': 'boom-1' } });
    expect(boom.status).toBe(500);
    const body = await boom.text();
    expect(body).not.toContain('internal detail');
    expect(JSON.parse(body)).toEqual({ error: { message: 'Internal error; see the gateway log for the correlation id.', type: 'server_error', code: 'internal_error' } });
    const later = await a.request('/unavailable', { headers: auth });
    expect(later.status).toBe(503);
    const store = await a.request('/store-failed', { headers: auth });
    expect(store.status).toBe(500);
    expect(await store.json()).toEqual({ error: { message: 'The store failed.', type: 'server_error', code: 'store_failed' } });
    expect(error.map(([o, m]) => [o.correlationId, o.path, (o.err as Error).message, m])).toEqual([
      ['boom-1', '/boom', 'internal detail', 'HTTP handler failed'],
      [later.headers.get('x-correlation-id'), '/unavailable', 'Later.', 'HTTP handler failed'],
      [store.headers.get('x-correlation-id'), '/store-failed', 'The store failed.', 'HTTP handler failed'],
    ]);
  });
});

describe('createHttpApp: one log line per refused request', () => {
  it('401, 400, 413 and other 4xx are logged with method, path, status and error code; never the query string', async () => {
    const { app: a, info } = app();
    await a.request('/echo?secret=1', { headers: { 'x-request-id': 'r1' } });
    await a.request('/bad', { headers: { ...auth, 'x-request-id': 'r2' } });
    await a.request('/upload', { method: 'POST', headers: { ...auth, 'x-request-id': 'r3' }, body: 'x'.repeat(17) });
    await a.request('/plain-400', { headers: { ...auth, 'x-request-id': 'r4' } });
    expect(info).toEqual([
      [{ correlationId: 'r1', method: 'GET', path: '/echo', status: 401, code: 'unauthorized' }, 'HTTP request refused'],
      [{ correlationId: 'r2', method: 'GET', path: '/bad', status: 400, code: 'bad_thing' }, 'HTTP request refused'],
      [{ correlationId: 'r3', method: 'POST', path: '/upload', status: 413, code: 'body_too_large' }, 'HTTP request refused'],
      [{ correlationId: 'r4', method: 'GET', path: '/plain-400', status: 400, code: undefined }, 'HTTP request refused'],
    ]);
  });

  it('answers that are not refusals are not logged: 2xx, 404, 5xx', async () => {
    const { app: a, info } = app();
    await a.request('/echo', { headers: auth });
    await a.request('/nowhere', { headers: auth });
    await a.request('/boom', { headers: auth });
    await a.request('/unavailable', { headers: auth });
    await a.request('/healthz');
    expect(info).toEqual([]);
  });
});
