import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../src/main.ts';
import { startFakeSlack, type FakeSlack } from '../fakes/fake-slack.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';

/**
 * Every route of the real app × every method, in-process (`app.request()`), with the route list read from the
 * app itself: a route added later is covered without touching this file, and is protected unless listed below.
 */

const TOKEN = 'route-table-token';
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
type Method = (typeof METHODS)[number];

/** What may be asked without the bearer token on a gateway that has one (the platforms sign their webhooks). */
const PUBLIC: Record<string, Method[]> = {
  '/healthz': ['GET', 'HEAD'],
  // The dashboard's static files and its sign-in (dashboard-auth.ts). `/` serves the sign-in page to browsers
  // only (Accept: text/html, tested below); a program without the token gets 401 there like everywhere.
  '/favicon.svg': ['GET', 'HEAD'],
  '/favicon.ico': ['GET', 'HEAD'],
  '/assets/*': ['GET', 'HEAD'],
  '/dashboard/session': ['GET', 'HEAD'],
  '/dashboard/sign-in': ['POST'],
  '/dashboard/sign-out': ['POST'],
};
const isWebhook = (path: string) => path.startsWith('/webhooks/');
/** The sign-in's own answer to a body without the right token (`{}` here): the route answered, it is not the auth wall. */
const signInRefusal = (path: string, a: { code?: string }) => path === '/dashboard/sign-in' && a.code === 'wrong_token';

interface Route { path: string; methods: Set<string> }

/** The app's own route table: each path with the methods it has a handler for (middleware `ALL /*` left out). */
function routeTable(gw: RunningGateway): Route[] {
  const byPath = new Map<string, Set<string>>();
  for (const r of gw.app.routes) {
    if (r.method === 'ALL') continue;
    const methods = byPath.get(r.path) ?? new Set<string>();
    methods.add(r.method);
    if (r.method === 'GET') methods.add('HEAD'); // Hono answers HEAD with the GET handler
    byPath.set(r.path, methods);
  }
  return [...byPath].map(([path, methods]) => ({ path, methods }));
}

/** A concrete URL for a route pattern. */
function concrete(path: string): string {
  return path.replace(':key', encodeURIComponent('agent:main:main')).replace('*', 'app.js');
}

/** `code` and `message` of a JSON error; a HEAD answer has no body, so only its status says anything. */
interface Answer { status: number; head: boolean; code?: string; message?: string; allowOrigin: string | null }

async function ask(gw: RunningGateway, method: Method, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const body = method === 'GET' || method === 'HEAD' || method === 'OPTIONS' ? undefined : '{}';
  const response = await gw.app.request(concrete(path), { method, headers: { 'content-type': 'application/json', ...headers }, ...(body ? { body } : {}) });
  const allowOrigin = response.headers.get('access-control-allow-origin');
  // Streams (the dashboard's event stream) never end by themselves: read a JSON error only.
  if (!(response.headers.get('content-type') ?? '').includes('json')) {
    await response.body?.cancel();
    return { status: response.status, head: method === 'HEAD', allowOrigin };
  }
  const json = (await response.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
  return { status: response.status, head: method === 'HEAD', code: json.error?.code, message: json.error?.message, allowOrigin };
}

/** The app's "no such route" answer (not a handler's own 404 such as an unknown session). */
const noRoute = (a: Answer) => a.status === 404 && (a.head || (a.code === 'not_found' && (a.message ?? '').startsWith('No route')));
/** The refusal `status` with error `code`. */
const refused = (a: Answer, status: number, code: string) => a.status === status && (a.head || a.code === code);

function cases(table: Route[]): [string, Method, boolean][] {
  return table.flatMap((r) => METHODS.map((m): [string, Method, boolean] => [r.path, m, r.methods.has(m)]));
}

describe('every route × method, on a gateway with a token', () => {
  let gw: RunningGateway;
  let tmp: ReturnType<typeof tempDir>;
  let telegram: FakeTelegram;
  let slack: FakeSlack;
  let table: Route[];

  beforeAll(async () => {
    tmp = tempDir();
    [telegram, slack] = await Promise.all([startFakeTelegram(), startFakeSlack()]);
    gw = await startTestGateway({
      dir: tmp.dir,
      env: { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot, SLACK_BOT_TOKEN: 'xoxb-route-table', SLACK_SIGNING_SECRET: 'route-table-secret', SLACK_API_URL: slack.apiUrl },
      config: {
        gateway: { authToken: TOKEN },
        channels: { telegram: { mode: 'webhook', webhookSecret: 'route-table-webhook' }, slack: { mode: 'http' } },
      },
    });
    table = routeTable(gw);
    // A session to find under :key (agent:main:main), so that its routes answer 200 rather than "no such session".
    const chat = await gw.app.request('/webchat/messages', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text: 'hello' }) });
    expect(chat.status).toBe(200);
  });
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([telegram?.close(), slack?.close()]);
    tmp?.remove();
  });

  it('the table holds the routes every part of the gateway mounts', () => {
    const paths = table.map((r) => r.path);
    for (const path of ['/healthz', '/readyz', '/status', '/metrics', '/admin/sessions', '/admin/sessions/:key/reset', '/admin/pairing/approve',
      '/v1/chat/completions', '/v1/models', '/cli/messages', '/webchat/messages', '/webhooks/telegram/default', '/webhooks/slack/default', '/']) {
      expect(paths).toContain(path);
    }
    expect(table.length).toBeGreaterThan(25);
  });

  it('without the token, only the public routes answer; every other route and method is 401, never a 404 that tells routes apart', async () => {
    const wrong: string[] = [];
    for (const [path, method, exists] of cases(table)) {
      const a = await ask(gw, method, path);
      const isPublic = (PUBLIC[path] ?? []).includes(method);
      if (isWebhook(path)) {
        // Left to the platform's signature: refused by the channel, never let through.
        if (exists ? a.status !== 401 : !noRoute(a)) wrong.push(`${method} ${path} → ${a.status} ${a.code ?? ''}`);
      } else if (isPublic && exists) {
        if ((a.status === 401 && !signInRefusal(path, a)) || noRoute(a) || a.status >= 500) wrong.push(`${method} ${path} → ${a.status} ${a.code ?? ''} (public)`);
      } else if (!refused(a, 401, 'unauthorized')) {
        wrong.push(`${method} ${path} → ${a.status} ${a.code ?? ''} (expected 401)`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('GET / without the token is the sign-in page for a browser (Accept: text/html), with no secret in it', async () => {
    const response = await gw.app.request('/', { headers: { accept: 'text/html,application/xhtml+xml' } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/html');
    const page = await response.text();
    expect(page).toMatch(/sign in/i);
    expect(page).not.toContain(TOKEN);
  });

  it('a wrong token is refused like no token, on every protected route', async () => {
    const wrong: string[] = [];
    for (const { path, methods } of table) {
      if (isWebhook(path)) continue;
      for (const method of methods) {
        if ((PUBLIC[path] ?? []).includes(method as Method)) continue;
        const a = await ask(gw, method as Method, path, { authorization: `Bearer ${TOKEN}x` });
        if (!refused(a, 401, 'unauthorized')) wrong.push(`${method} ${path} → ${a.status}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('with the token, each route answers its own methods and only them (404 for the others), never a 5xx nor a CORS header', async () => {
    const wrong: string[] = [];
    const auth = { authorization: `Bearer ${TOKEN}` };
    for (const [path, method, exists] of cases(table)) {
      const a = await ask(gw, method, path, auth);
      if (a.allowOrigin !== null) wrong.push(`${method} ${path} sent Access-Control-Allow-Origin`);
      if (exists && method === 'HEAD') {
        const get = await ask(gw, 'GET', path, auth);
        if (a.status !== get.status) wrong.push(`HEAD ${path} → ${a.status}, GET → ${get.status}`);
      } else if (exists) {
        if (noRoute(a) || a.status >= 500 || (a.status === 401 && !isWebhook(path) && !signInRefusal(path, a))) wrong.push(`${method} ${path} → ${a.status} ${a.code ?? ''}`);
      } else if (!noRoute(a) && a.status !== 405) {
        wrong.push(`${method} ${path} → ${a.status} ${a.code ?? ''} (no such method)`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('an unknown path is a JSON 404 with the token and a 401 without', async () => {
    expect(noRoute(await ask(gw, 'GET', '/nowhere', { authorization: `Bearer ${TOKEN}` }))).toBe(true);
    expect(await ask(gw, 'GET', '/nowhere')).toMatchObject({ status: 401, code: 'unauthorized' });
    expect(noRoute(await ask(gw, 'GET', '/webhooks/nowhere'))).toBe(true);
  });
});

describe('every route × method, on a loopback gateway without a token', () => {
  let gw: RunningGateway;
  let tmp: ReturnType<typeof tempDir>;
  let table: Route[];

  beforeAll(async () => {
    tmp = tempDir();
    gw = await startTestGateway({ dir: tmp.dir });
    table = routeTable(gw);
  });
  afterAll(async () => {
    await gw?.stop();
    tmp?.remove();
  });

  it('a Host that is not this gateway (DNS rebinding) is refused on every route and method but /healthz', async () => {
    const wrong: string[] = [];
    for (const [path, method] of cases(table)) {
      // The platforms post webhooks from their own hosts; /healthz tells nothing (liveness probes).
      if (isWebhook(path) || path === '/healthz') continue;
      const a = await ask(gw, method, path, { host: 'evil.example' });
      if (!refused(a, 403, 'forbidden_host')) wrong.push(`${method} ${path} → ${a.status} ${a.code ?? ''}`);
    }
    expect(wrong).toEqual([]);
  });

  it("a state-changing request from another site is refused on every route; the gateway's own pages and programs get through", async () => {
    const wrong: string[] = [];
    for (const { path, methods } of table) {
      for (const method of methods) {
        if (method === 'GET' || method === 'HEAD') continue;
        const cross = await ask(gw, method as Method, path, { host: '127.0.0.1:18789', origin: 'https://evil.example' });
        if (!refused(cross, 403, 'cross_site_request')) wrong.push(`${method} ${path} cross-site → ${cross.status} ${cross.code ?? ''}`);
        const own = await ask(gw, method as Method, path, { host: '127.0.0.1:18789', origin: 'http://127.0.0.1:18789' });
        if (own.status === 403 || noRoute(own) || own.status >= 500) wrong.push(`${method} ${path} own page → ${own.status} ${own.code ?? ''}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('reads from this host answer on every GET route', async () => {
    const wrong: string[] = [];
    for (const { path, methods } of table) {
      if (!methods.has('GET')) continue;
      const a = await ask(gw, 'GET', path, { host: 'localhost:18789' });
      if (a.status === 401 || a.status === 403 || noRoute(a) || a.status >= 500) wrong.push(`GET ${path} → ${a.status} ${a.code ?? ''}`);
    }
    expect(wrong).toEqual([]);
  });
});
