import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/core/errors.ts';
import { createLogger } from '../../src/core/logger.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { useTempDir } from '../helpers/fixtures.ts';

describe('refused HTTP requests and correlation ids', () => {
  const tmp = useTempDir();
  let gw: RunningGateway | undefined;
  let lines: Record<string, unknown>[];
  beforeEach(() => { lines = []; });
  afterEach(async () => { await gw?.stop(); gw = undefined; });

  const logger = () => createLogger({
    level: 'info', secrets: ['gw-secret-token'],
    destination: new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l)); cb(); } }),
  });

  it('logs one info line per refused request (status, code, path, correlation id), never the token', async () => {
    gw = await startTestGateway({ dir: tmp.dir, logger: logger(), config: { gateway: { authToken: 'gw-secret-token', maxBodyBytes: 64 } } });
    const before = lines.length;
    expect((await fetch(`${gw.url}/status?token=x`, { headers: { authorization: 'Bearer wrong-token', 'x-request-id': 'refused-1' } })).status).toBe(401);
    expect((await fetch(`${gw.url}/status`, { headers: { authorization: 'Bearer not a token!' } })).status).toBe(401);
    const big = await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { authorization: 'Bearer gw-secret-token', 'content-type': 'application/json' }, body: JSON.stringify({ text: 'x'.repeat(200) }) });
    expect(big.status).toBe(413);
    expect((await fetch(`${gw.url}/status`, { headers: { authorization: 'Bearer gw-secret-token' } })).status).toBe(200);
    const refused = lines.slice(before).filter((l) => l.msg === 'HTTP request refused');
    expect(refused.map((l) => [l.status, l.code, l.path, l.level])).toEqual([[401, 'unauthorized', '/status', 30], [401, 'unauthorized', '/status', 30], [413, 'body_too_large', '/webchat/messages', 30]]);
    expect(refused[0]).toMatchObject({ correlationId: 'refused-1', method: 'GET' });
    expect(JSON.stringify(lines)).not.toContain('gw-secret-token');
    expect(JSON.stringify(refused)).not.toContain('token=x');
  });

  it('takes X-Request-Id, else X-Trace-Id, as the correlation id, and makes one otherwise', async () => {
    gw = await startTestGateway({ dir: tmp.dir });
    const id = async (headers: Record<string, string>) => (await fetch(`${gw!.url}/healthz`, { headers })).headers.get('x-correlation-id');
    expect(await id({ 'x-request-id': 'abc-123' })).toBe('abc-123');
    expect(await id({ 'x-trace-id': 'trace-9' })).toBe('trace-9');
    expect(await id({ 'x-request-id': 'bad id with spaces', 'x-trace-id': 'trace-10' })).toBe('trace-10');
    expect(await id({})).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('refuses to start with a token that cannot be sent as a bearer token', async () => {
    const error = await startTestGateway({ dir: tmp.dir, config: { gateway: { authToken: 'has spaces in it' } } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/gateway\.authToken .* may only hold/);
  });
});
