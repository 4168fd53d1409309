import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { testConfig, tempDir } from '../helpers/gateway.ts';

/** `limits.perSender` on `/v1/chat/completions`: one bucket per bearer token when one is sent, else per client address. */
describe('the API rate-limit key', () => {
  let fake: FakeOpenAI;
  let gw: RunningGateway | undefined;
  let tmp: { dir: string; remove: () => void };

  beforeEach(async () => {
    fake = await startFakeOpenAI(() => ({ content: 'ok', usage: null }));
    tmp = tempDir();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await fake.close();
    tmp.remove();
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
  const ask = (token?: string) => fetch(`${gw!.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ model: 'main', messages: [{ role: 'user', content: 'hi' }] }),
  });

  it('two bearer tokens from one address have a bucket each, and the address without a token a third', async () => {
    await start();
    expect((await ask('key-a')).status).toBe(200);
    expect((await ask('key-a')).status).toBe(200);
    const limited = await ask('key-a');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('30');
    expect((await ask('key-b')).status).toBe(200);
    expect((await ask('key-b')).status).toBe(200);
    expect((await ask('key-b')).status).toBe(429);
    expect((await ask()).status).toBe(200);
    expect((await ask()).status).toBe(200);
    expect((await ask()).status).toBe(429);
  });

  it('with gateway.authToken, the callers of the one token share its bucket', async () => {
    await start({ authToken: 'secret-token' });
    expect((await ask('secret-token')).status).toBe(200);
    expect((await ask('secret-token')).status).toBe(200);
    expect((await ask('secret-token')).status).toBe(429);
    expect((await ask('wrong')).status).toBe(401);
  });
});
