import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { testConfig } from '../helpers/gateway.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

/**
 * `limits.perSender` on `/v1/chat/completions` (SPEC §14): without `gateway.authToken` a bearer is never checked,
 * so the bucket is the client's address whatever bearer it sends; with one, the bucket is the token from that address.
 */
describe('the API rate-limit key', () => {
  const fake = useFakeOpenAI(() => ({ content: 'ok', usage: null }));
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const start = async (gateway: Record<string, unknown> = {}) => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        limits: { perSender: { perMinute: 2, burst: 2 } }, agents: { defaults: { tools: { preset: 'none' } } }, gateway: { port: 0, ...gateway },
      }),
      logger: silentLogger(), clock: new ManualClock('2026-06-01T10:00:00Z'),
    });
  };
  const ask = (from: string, token?: string) => gw!.app.request('/v1/chat/completions', {
    method: 'POST',
    headers: { host: '127.0.0.1', 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ model: 'main', messages: [{ role: 'user', content: 'hi' }] }),
  }, { incoming: { socket: { remoteAddress: from } } });

  it('without gateway.authToken, a new bearer per request from one address does not get past its bucket', async () => {
    await start();
    expect((await ask('10.0.0.1', 'random-1')).status).toBe(200);
    expect((await ask('10.0.0.1', 'random-2')).status).toBe(200);
    const limited = await ask('10.0.0.1', 'random-3');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('30');
    expect((await ask('10.0.0.1')).status).toBe(429);
    expect((await ask('10.0.0.2', 'random-3')).status).toBe(200);
    expect(fake.requests).toHaveLength(3);
  });

  it('with gateway.authToken, the token has a bucket per address, and a wrong token is a 401', async () => {
    await start({ authToken: 'secret-token' });
    expect((await ask('10.0.0.1', 'secret-token')).status).toBe(200);
    expect((await ask('10.0.0.1', 'secret-token')).status).toBe(200);
    expect((await ask('10.0.0.1', 'secret-token')).status).toBe(429);
    expect((await ask('10.0.0.2', 'secret-token')).status).toBe(200);
    expect((await ask('10.0.0.2', 'secret-token')).status).toBe(200);
    expect((await ask('10.0.0.2', 'secret-token')).status).toBe(429);
    expect((await ask('10.0.0.3', 'wrong')).status).toBe(401);
  });
});
