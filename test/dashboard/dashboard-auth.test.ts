import { beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { createHttpApp, type HttpApp } from '../../src/http/app.ts';
import { createDashboardAuth, type DashboardAuth } from '../../src/http/dashboard-auth.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const TOKEN = 'owner-token-42';
const HOST = 'gw.test:18789';
const SELF = `http://${HOST}`;

describe('dashboard sign-in: session cookie next to the bearer token', () => {
  const tmp = useTempDir();
  let clock: ManualClock;
  beforeEach(() => {
    clock = new ManualClock(Date.UTC(2026, 0, 1));
  });

  /** The sign-in of the last gateway made. */
  let lastAuth: DashboardAuth;
  function gateway(token = TOKEN, maxTrackedClients?: number): HttpApp {
    const auth = createDashboardAuth({ token, stateDir: tmp.dir, clock, ...(maxTrackedClients ? { maxTrackedClients } : {}) });
    lastAuth = auth;
    return createHttpApp({
      authToken: token, maxBodyBytes: 10_000, logger: silentLogger(), channelRoutes: [], browserAuth: (c) => auth.verdict(c),
      mounts: [auth.mount, (app) => {
        app.get('/', (c) => c.text(auth.via(c) ? 'dashboard' : 'sign-in'));
        app.get('/status', (c) => c.json({ ok: true }));
        app.post('/admin/act', (c) => c.json({ done: true }));
      }],
    });
  }
  const call = (app: HttpApp, path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown; from?: string } = {}) => app.request(`${SELF}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: { host: HOST, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  }, { incoming: { socket: { remoteAddress: init.from ?? '10.0.0.1' } } });
  const signIn = async (app: HttpApp, token: string, headers: Record<string, string> = { origin: SELF }, from?: string) => call(app, '/dashboard/sign-in', { body: { token }, headers, ...(from ? { from } : {}) });
  const HTML = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' };
  const cookieOf = (response: Response) => /switchboard_session=([^;]*)/.exec(response.headers.get('set-cookie') ?? '')?.[1] ?? '';
  const withCookie = (value: string, more: Record<string, string> = {}) => ({ cookie: `switchboard_session=${value}`, ...more });

  it('exchanges the right token for an HttpOnly, SameSite=Strict cookie that opens the API; a wrong token says so', async () => {
    const app = gateway();
    expect(await (await call(app, '/', { headers: HTML })).text()).toBe('sign-in');
    // Only a browser asking for a page gets the sign-in page; a program without the token gets 401 JSON.
    const program = await call(app, '/', { headers: { accept: 'application/json' } });
    expect(program.status).toBe(401);
    expect(await program.json()).toEqual({ error: { message: 'Missing or wrong bearer token: send Authorization: Bearer <gateway.authToken>.', type: 'authentication_error', code: 'unauthorized' } });
    expect((await call(app, '/')).status).toBe(401);
    expect((await call(app, '/status')).status).toBe(401);
    const wrong = await signIn(app, 'guess');
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ error: { code: 'wrong_token', message: expect.stringMatching(/^Wrong token/) } });
    expect(wrong.headers.get('set-cookie')).toBeNull();

    const right = await signIn(app, TOKEN);
    expect(right.status).toBe(200);
    const header = right.headers.get('set-cookie')!;
    expect(header).toMatch(/HttpOnly/);
    expect(header).toMatch(/SameSite=Strict/);
    expect(header).toMatch(/Path=\//);
    expect(header).toMatch(/Max-Age=604800/);
    expect(header).not.toMatch(/Secure/);
    expect(header).not.toContain(TOKEN);
    const cookie = cookieOf(right);
    expect((await call(app, '/status', { headers: withCookie(cookie) })).status).toBe(200);
    expect(await (await call(app, '/', { headers: withCookie(cookie, HTML) })).text()).toBe('dashboard');
    expect(await (await call(app, '/', { headers: withCookie(cookie) })).text()).toBe('dashboard');
    expect(await (await call(app, '/dashboard/session', { headers: withCookie(cookie) })).json()).toEqual({ authRequired: true, signedIn: true, via: 'cookie' });
    // Behind an HTTPS proxy the cookie is Secure.
    expect((await signIn(app, TOKEN, { origin: SELF, 'x-forwarded-proto': 'https' })).headers.get('set-cookie')).toMatch(/Secure/);
  });

  it('takes state-changing requests with the cookie only from the gateway\'s own page; the bearer header needs no page', async () => {
    const app = gateway();
    const cookie = cookieOf(await signIn(app, TOKEN));
    const post = (headers: Record<string, string>) => call(app, '/admin/act', { body: {}, headers });
    expect((await post(withCookie(cookie, { origin: SELF }))).status).toBe(200);
    expect((await post(withCookie(cookie, { 'sec-fetch-site': 'same-origin' }))).status).toBe(200);
    const refusals: Record<string, string>[] = [{}, { origin: 'https://evil.example' }, { 'sec-fetch-site': 'cross-site', origin: SELF }, { 'sec-fetch-site': 'same-site' }, { origin: 'null' }];
    for (const refused of refusals) {
      const response = await post(withCookie(cookie, refused));
      expect(response.status, JSON.stringify(refused)).toBe(403);
      expect(await response.json()).toMatchObject({ error: { code: 'cross_site_request' } });
    }
    // Signing in from another site (login CSRF) is refused, and signing out needs the own page.
    const foreigners: Record<string, string>[] = [{ origin: 'https://evil.example' }, { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: 'null' }];
    for (const foreign of foreigners) {
      const response = await signIn(app, TOKEN, foreign);
      expect(response.status, JSON.stringify(foreign)).toBe(403);
      expect(await response.json()).toMatchObject({ error: { code: 'cross_site_request' } });
      expect(response.headers.get('set-cookie')).toBeNull();
    }
    expect((await call(app, '/dashboard/sign-out', { body: {}, headers: withCookie(cookie) })).status).toBe(403);
    // Programs: the bearer header as before, with or without an Origin; a wrong bearer is not rescued by a cookie.
    expect((await post({ authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    expect((await post(withCookie(cookie, { authorization: 'Bearer wrong', origin: SELF }))).status).toBe(401);
  });

  it('lets a program (no Origin, no Sec-Fetch-Site: curl, Node\'s fetch) sign in; its cookie\'s actions still need the own page', async () => {
    const app = gateway();
    const wrong = await signIn(app, 'guess', {});
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ error: { message: 'Wrong token: that is not this gateway\'s gateway.authToken.', type: 'authentication_error', code: 'wrong_token' } });
    expect(wrong.headers.get('set-cookie')).toBeNull();

    const right = await signIn(app, TOKEN, {});
    expect(right.status).toBe(200);
    expect(await right.json()).toEqual({ signedIn: true, via: 'cookie' });
    const header = right.headers.get('set-cookie')!;
    expect(header).toMatch(/HttpOnly/);
    expect(header).toMatch(/SameSite=Strict/);
    const cookie = cookieOf(right);
    expect(cookie).not.toBe('');
    expect((await call(app, '/status', { headers: withCookie(cookie) })).status).toBe(200);
    expect((await call(app, '/admin/act', { body: {}, headers: withCookie(cookie) })).status).toBe(403);
    expect((await call(app, '/dashboard/sign-out', { body: {}, headers: withCookie(cookie) })).status).toBe(403);
  });

  it('refuses forged, expired and foreign cookies; a new token signs every browser out', async () => {
    const app = gateway();
    const cookie = cookieOf(await signIn(app, TOKEN));
    const [v, issued, nonce, mac] = cookie.split('.');
    const forged = [`${v}.${(Date.UTC(2030, 0, 1)).toString(36)}.${nonce}.${mac}`, `${v}.${issued}.${nonce}x.${mac}`, `${v}.${issued}.${nonce}.${mac!.slice(1)}A`, 'v1', ''];
    for (const value of forged) expect((await call(app, '/status', { headers: withCookie(value) })).status, value).toBe(401);
    expect((await call(gateway('another-token-7'), '/status', { headers: withCookie(cookie) })).status).toBe(401);
    clock.advance(7 * 86_400_000 - 1000);
    expect((await call(app, '/status', { headers: withCookie(cookie) })).status).toBe(200);
    clock.advance(2000);
    expect((await call(app, '/status', { headers: withCookie(cookie) })).status).toBe(401);
  });

  it('sign-out ends that cookie, also after a restart, and leaves other browsers signed in', async () => {
    const app = gateway();
    const mine = cookieOf(await signIn(app, TOKEN));
    const other = cookieOf(await signIn(app, TOKEN));
    const out = await call(app, '/dashboard/sign-out', { body: {}, headers: withCookie(mine, { origin: SELF }) });
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toMatch(/switchboard_session=;.*Max-Age=0/);
    expect((await call(app, '/status', { headers: withCookie(mine) })).status).toBe(401);
    expect((await call(app, '/status', { headers: withCookie(other) })).status).toBe(200);
    const restarted = gateway();
    expect((await call(restarted, '/status', { headers: withCookie(mine) })).status).toBe(401);
    expect((await call(restarted, '/status', { headers: withCookie(other) })).status).toBe(200);
  });

  it('answers 429 to wrong tokens after 10 in a minute from one address, yet the right token still signs in', async () => {
    const app = gateway();
    for (let i = 0; i < 10; i++) expect((await signIn(app, `guess-${i}`)).status).toBe(401);
    const limited = await signIn(app, 'guess-10');
    expect(limited.status).toBe(429);
    expect(await limited.json()).toMatchObject({ error: { code: 'rate_limit_exceeded', message: 'Too many wrong tokens; wait a minute and try again.' } });
    // Behind a proxy everyone shares one address: a stranger's guesses must not lock the owner out.
    const owner = await signIn(app, TOKEN);
    expect(owner.status).toBe(200);
    expect(cookieOf(owner)).not.toBe('');
    expect((await signIn(app, 'guess-11')).status).toBe(429);
    expect((await signIn(app, 'guess-12', { origin: SELF }, '10.0.0.2')).status).toBe(401);
    clock.advance(60_000);
    expect((await signIn(app, 'guess-13')).status).toBe(401);
  });

  it('answers the sign-in page (its header) 200 { signedIn: false, error } for a refused token, so the browser logs no failed request', async () => {
    const app = gateway();
    const page = { origin: SELF, 'x-switchboard-sign-in': 'page' };
    const wrong = await signIn(app, 'guess', page);
    expect(wrong.status).toBe(200);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect(await wrong.json()).toEqual({ signedIn: false, error: { message: 'Wrong token: that is not this gateway\'s gateway.authToken.', type: 'authentication_error', code: 'wrong_token' } });
    for (let i = 0; i < 9; i++) await signIn(app, `guess-${i}`, page);
    expect(await (await signIn(app, 'guess-x', page)).json()).toMatchObject({ signedIn: false, error: { code: 'rate_limit_exceeded' } });
    const right = await signIn(app, TOKEN, page);
    expect(await right.json()).toEqual({ signedIn: true, via: 'cookie' });
    expect(cookieOf(right)).not.toBe('');
  });

  it('forgets addresses whose minute is over, and keeps at most maxTrackedClients of them', async () => {
    const app = gateway(TOKEN, 3);
    for (const from of ['10.0.0.1', '10.0.0.2']) expect((await signIn(app, 'guess', { origin: SELF }, from)).status).toBe(401);
    expect(lastAuth.throttledClients).toBe(2);
    clock.advance(60_000);
    expect(lastAuth.throttledClients).toBe(0);
    for (const from of ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5']) await signIn(app, 'guess', { origin: SELF }, from);
    expect(lastAuth.throttledClients).toBe(3);
    // The oldest (10.0.0.1) was forgotten: its count starts again, while 10.0.0.5's goes on.
    for (let i = 0; i < 10; i++) expect((await signIn(app, 'guess', { origin: SELF }, '10.0.0.1')).status).toBe(401);
    expect((await signIn(app, 'guess', { origin: SELF }, '10.0.0.1')).status).toBe(429);
  });
});
