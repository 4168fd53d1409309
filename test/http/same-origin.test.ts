import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostName } from '../../src/http/same-origin.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';

/** A raw HTTP request (fetch does not let a test set Host), answered with status, headers and body. */
function raw(
  gw: RunningGateway, options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  const url = new URL(gw.url!);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method: options.method ?? 'GET', path: options.path, headers: options.headers }, (res) => {
      let body = '';
      res.on('data', (chunk) => { body += chunk; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const json = { 'content-type': 'application/json' };
const chat = JSON.stringify({ user: 'x', text: 'hello' });

describe('same-origin protection without an auth token', () => {
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway;
  let self: string;

  beforeAll(async () => {
    tmp = tempDir('switchboard-origin-');
    gw = await startTestGateway({ dir: tmp.dir, config: { gateway: { allowedHosts: ['bot.example.com'] } } });
    self = new URL(gw.url!).host;
  });
  afterAll(async () => {
    await gw?.stop();
    tmp?.remove();
  });

  it('refuses a foreign Host (DNS rebinding) on every route, reads included', async () => {
    for (const path of ['/admin/sessions', '/status', '/usage', '/', '/admin/sessions/agent%3Amain%3Amain/history']) {
      const response = await raw(gw, { path, headers: { host: `rebind.attacker.example:${new URL(gw.url!).port}` } });
      expect(response.status, path).toBe(403);
      expect(JSON.parse(response.body).error.code).toBe('forbidden_host');
    }
    const post = await raw(gw, { method: 'POST', path: '/webchat/messages', headers: { host: 'evil.example', ...json }, body: chat });
    expect(post.status).toBe(403);
  });

  it('takes its own names: loopback, gateway.host and gateway.allowedHosts; /healthz answers any Host', async () => {
    const port = new URL(gw.url!).port;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, 'LOCALHOST', 'bot.example.com', '127.0.0.2']) {
      expect((await raw(gw, { path: '/status', headers: { host } })).status, host).toBe(200);
    }
    expect((await raw(gw, { path: '/healthz', headers: { host: 'anything.example' } })).status).toBe(200);
  });

  it('refuses cross-site state-changing requests: text/plain, forms, a foreign or null Origin, Sec-Fetch-Site', async () => {
    const cases: Record<string, string>[] = [
      { host: self, 'content-type': 'text/plain' },
      { host: self, 'content-type': 'application/x-www-form-urlencoded' },
      { host: self, 'content-type': 'multipart/form-data; boundary=x' },
      { host: self, origin: 'https://evil.example', 'content-type': 'text/plain' },
      { host: self, origin: 'https://evil.example', ...json },
      { host: self, origin: 'null', ...json },
      { host: self, origin: `http://localhost:1`, ...json },
      { host: self, 'sec-fetch-site': 'cross-site', ...json },
    ];
    for (const headers of cases) {
      const response = await raw(gw, { method: 'POST', path: '/webchat/messages', headers, body: chat });
      expect(response.status, JSON.stringify(headers)).toBe(403);
      expect(['cross_site_request', 'json_required']).toContain(JSON.parse(response.body).error.code);
    }
    const reset = await raw(gw, { method: 'POST', path: `/admin/sessions/${encodeURIComponent('agent:main:main')}/reset`, headers: { host: self, origin: 'https://evil.example', 'content-type': 'text/plain' } });
    expect(reset.status).toBe(403);
    expect(gw.gateway.stats.accepted).toBe(0);
  });

  it('takes JSON from programs, its own pages (matching Origin) and bodyless calls; never sends CORS headers', async () => {
    const program = await raw(gw, { method: 'POST', path: '/webchat/messages', headers: { host: self, ...json }, body: chat });
    expect(program.status).toBe(200);
    const page = await raw(gw, { method: 'POST', path: '/webchat/messages', headers: { host: self, origin: `http://${self}`, 'sec-fetch-site': 'same-origin', ...json }, body: chat });
    expect(page.status).toBe(200);
    const cli = await raw(gw, { method: 'POST', path: `/admin/sessions/${encodeURIComponent('agent:main:webchat:direct:x')}/compact`, headers: { host: self } });
    expect(cli.status).not.toBe(403);
    const preflight = await raw(gw, { method: 'OPTIONS', path: '/webchat/messages', headers: { host: self, origin: 'https://evil.example', 'access-control-request-method': 'POST' } });
    for (const response of [program, page, preflight]) {
      expect(Object.keys(response.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
    }
  });

  it('leaves webhooks to their signatures: platforms post from their own hosts', async () => {
    const response = await raw(gw, { method: 'POST', path: '/webhooks/telegram/default', headers: { host: 'bot.public.example', 'content-type': 'application/json' }, body: '{}' });
    expect(response.status).toBe(404); // no Telegram account here: not refused by the guard
  });

  it('reads host names from Host headers', () => {
    expect(hostName('LocalHost:18789')).toBe('localhost');
    expect(hostName('[::1]:80')).toBe('::1');
    expect(hostName('::1')).toBe('::1');
    expect(hostName('bot.example.com')).toBe('bot.example.com');
  });
});

describe('with an auth token', () => {
  it('the token is the protection: any Host and content type with the right bearer token', async () => {
    const tmp = tempDir('switchboard-origin-token-');
    const gw = await startTestGateway({ dir: tmp.dir, config: { gateway: { authToken: 'secret-token-123' } } });
    try {
      const response = await raw(gw, { path: '/status', headers: { host: 'proxy.example', authorization: 'Bearer secret-token-123' } });
      expect(response.status).toBe(200);
      expect((await raw(gw, { path: '/status', headers: { host: 'proxy.example' } })).status).toBe(401);
    } finally {
      await gw.stop();
      tmp.remove();
    }
  });
});
