import { afterEach, describe, expect, it } from 'vitest';
import { startApiHarness, type ApiHarness } from '../http/api-harness.ts';
import { readSse, type SseReader } from './sse.ts';

const TOKEN = 'gw-dashboard-token';

describe('dashboard pages, assets and live stream through the gateway', () => {
  let h: ApiHarness;
  let sse: SseReader | undefined;
  afterEach(async () => {
    await sse?.cancel();
    sse = undefined;
    await h?.close();
  });

  it('without a token serves the dashboard and its assets from the gateway (no CDN), with a strict CSP', async () => {
    h = await startApiHarness();
    const page = await fetch(`${h.gw.url}/`);
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    const html = await page.text();
    expect(html).toContain('<script type="module" src="/assets/app.js">');
    expect(html).toContain('rel="icon" href="/favicon.svg"');
    expect(html).not.toMatch(/https?:\/\//);
    for (const [path, type] of [['/assets/app.js', 'text/javascript'], ['/assets/dashboard.css', 'text/css'], ['/favicon.svg', 'image/svg+xml'], ['/favicon.ico', 'image/svg+xml']]) {
      const response = await fetch(`${h.gw.url}${path}`);
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-type'), path).toContain(type);
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    }
    const vendor = await fetch(`${h.gw.url}/assets/vendor/markdown-it.mjs`);
    const markdownIt = await vendor.text();
    expect(markdownIt).toContain('export');
    expect(markdownIt).not.toContain('sourceMappingURL');
    for (const missing of ['/assets/nothing.js', '/assets/dashboard.html', '/assets/../dashboard.ts']) expect((await fetch(`${h.gw.url}${missing}`)).status, missing).toBe(404);
    const etag = (await fetch(`${h.gw.url}/assets/app.js`)).headers.get('etag')!;
    expect((await fetch(`${h.gw.url}/assets/app.js`, { headers: { 'if-none-match': etag } })).status).toBe(304);
    // Every script the pages load is served here, and every module they import too.
    const scripts = ['app.js', 'sign-in.js'];
    const seen = new Set<string>();
    while (scripts.length) {
      const name = scripts.pop()!;
      if (seen.has(name)) continue;
      seen.add(name);
      const response = await fetch(`${h.gw.url}/assets/${name}`);
      expect(response.status, name).toBe(200);
      for (const m of (await response.text()).matchAll(/from '(?:\.\/|\/assets\/)([\w./-]+)'/g)) scripts.push(m[1]!);
    }
    expect([...seen].sort()).toEqual(['api.js', 'app.js', 'chat.js', 'markdown.js', 'ops.js', 'session-parts.js', 'sessions.js', 'sign-in.js', 'timeline.js', 'vendor/markdown-it.mjs']);
  });

  it('with a token serves the sign-in page (no secret in it) to browsers only, and keeps the data behind the token', async () => {
    h = await startApiHarness({ config: { providers: { default: { maxRetries: 0 } }, gateway: { port: 0, authToken: TOKEN } }, apiKey: TOKEN });
    const page = await fetch(`${h.gw.url}/`, { headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Gateway token');
    expect(html).not.toContain(TOKEN);
    // SPEC §7: every route but /healthz needs the token; a program (no text/html in Accept) gets 401 JSON.
    for (const accept of [undefined, 'application/json', '*/*']) {
      const refused = await fetch(`${h.gw.url}/`, accept ? { headers: { accept } } : {});
      expect(refused.status, accept).toBe(401);
      expect(await refused.json()).toMatchObject({ error: { type: 'authentication_error', code: 'unauthorized' } });
    }
    expect((await fetch(`${h.gw.url}/assets/app.js`)).status).toBe(200);
    expect((await fetch(`${h.gw.url}/favicon.svg`)).status).toBe(200);
    expect((await fetch(`${h.gw.url}/dashboard/events`)).status).toBe(401);
    expect((await fetch(`${h.gw.url}/admin/sessions`)).status).toBe(401);
    // A proxy that adds the bearer header gets the dashboard itself.
    expect(await (await fetch(`${h.gw.url}/`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()).toContain('/assets/app.js');
  });

  it('streams the session events of a turn made by another client', async () => {
    h = await startApiHarness({ config: { providers: { default: { maxRetries: 0 } }, gateway: { port: 0, authToken: TOKEN } }, apiKey: TOKEN });
    const auth = { authorization: `Bearer ${TOKEN}` };
    const response = await fetch(`${h.gw.url}/dashboard/events`, { headers: auth });
    expect(response.status).toBe(200);
    sse = readSse(response);
    expect(await sse.next()).toMatchObject({ event: 'hello', retry: 1000 });
    const status = await sse.until((e) => e.event === 'status');
    expect(status.data).toMatchObject({ channels: expect.arrayContaining([expect.objectContaining({ id: 'webchat', status: 'running' })]) });
    await sse.until((e) => e.event === 'pairing');
    const reply = await (await fetch(`${h.gw.url}/webchat/messages`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ user: 'zoe', text: 'hi' }) })).json() as { sessionKey: string };
    const key = reply.sessionKey;
    const reasons: string[] = [];
    while (!reasons.includes('turn-end')) {
      // Entries compared each second may add a `changed` event; the turn's own events come in order.
      const e = await sse.until((x) => x.event === 'session' && (x.data as { reason: string }).reason !== 'changed');
      expect(e.data).toMatchObject({ key });
      reasons.push((e.data as { reason: string }).reason);
    }
    expect(reasons).toEqual(['turn-start', 'llm-call', 'batch-end', 'turn-end']);
  });

  it('ends a browser\'s open event stream when it signs out; a stream opened with the bearer header stays', async () => {
    h = await startApiHarness({ config: { providers: { default: { maxRetries: 0 } }, gateway: { port: 0, authToken: TOKEN } }, apiKey: TOKEN });
    const url = h.gw.url!;
    const signIn = await fetch(`${url}/dashboard/sign-in`, { method: 'POST', headers: { origin: url, 'content-type': 'application/json' }, body: JSON.stringify({ token: TOKEN }) });
    const cookie = `switchboard_session=${/switchboard_session=([^;]+)/.exec(signIn.headers.get('set-cookie') ?? '')![1]}`;
    const browser = readSse(await fetch(`${url}/dashboard/events`, { headers: { cookie } }));
    sse = readSse(await fetch(`${url}/dashboard/events`, { headers: { authorization: `Bearer ${TOKEN}` } }));
    await browser.until((e) => e.event === 'pairing');
    await sse.until((e) => e.event === 'pairing');
    expect((await fetch(`${url}/dashboard/sign-out`, { method: 'POST', headers: { origin: url, cookie } })).status).toBe(200);
    const rest = await browser.rest();
    expect(rest.at(-1)?.event).toBe('signed-out');
    expect((await fetch(`${url}/dashboard/events`, { headers: { cookie } })).status).toBe(401);
    // The program's stream goes on: it still gets turn events.
    const reply = await (await fetch(`${url}/webchat/messages`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ user: 'yan', text: 'hi' }) })).json() as { sessionKey: string };
    await sse.until((e) => e.event === 'session' && (e.data as { key: string }).key === reply.sessionKey);
  });
});
