import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { useTempDir } from '../helpers/fixtures.ts';

/**
 * `limits.perSender` on `POST /webchat/messages` (SPEC §14): `user` is whatever the client sends, so the bucket is
 * that name from that client's address (with the gateway's token when `gateway.authToken` is set): nobody can use
 * up someone else's bucket by writing under their name from elsewhere, and a bearer the gateway does not check
 * never opens a fresh bucket.
 */
describe('the web chat rate-limit key', () => {
  const tmp = useTempDir('switchboard-webchat-rate-key-');
  let gw: RunningGateway | undefined;

  const start = async (gateway: Record<string, unknown> = {}) => {
    await gw?.stop();
    gw = await startTestGateway({
      dir: tmp.dir, clock: new ManualClock('2026-06-01T10:00:00Z'),
      config: { limits: { perSender: { perMinute: 2, burst: 2 } }, agents: { defaults: { tools: { preset: 'none' } } }, gateway: { port: 0, ...gateway } },
    });
  };
  beforeEach(async () => {
    await start();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const say = (user: string, from: string, headers: Record<string, string> = {}) => gw!.app.request('/webchat/messages', {
    method: 'POST', headers: { host: '127.0.0.1', 'content-type': 'application/json', ...headers }, body: JSON.stringify({ user, text: 'hello' }),
  }, { incoming: { socket: { remoteAddress: from } } });

  it('the third message of a name from one address is a 429 with Retry-After in OpenAI\'s error shape', async () => {
    expect((await say('ann', '10.0.0.1')).status).toBe(200);
    expect((await say('ann', '10.0.0.1')).status).toBe(200);
    const limited = await say('ann', '10.0.0.1');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('30');
    expect(await limited.json()).toEqual({
      error: { message: 'Too many messages from you; try again in 30 s.', type: 'rate_limit_error', code: 'rate_limit_exceeded' },
    });
  });

  it('two addresses writing under the same name are not limited together', async () => {
    expect((await say('ann', '10.0.0.1')).status).toBe(200);
    expect((await say('ann', '10.0.0.1')).status).toBe(200);
    expect((await say('ann', '10.0.0.1')).status).toBe(429);
    expect((await say('ann', '10.0.0.2')).status).toBe(200);
    expect((await say('ann', '10.0.0.2')).status).toBe(200);
    expect((await say('ann', '10.0.0.2')).status).toBe(429);
  });

  it('without gateway.authToken, a new bearer per message from one address shares the address\'s bucket', async () => {
    expect((await say('ann', '10.0.0.1', { authorization: 'Bearer random-1' })).status).toBe(200);
    expect((await say('ann', '10.0.0.1', { authorization: 'Bearer random-2' })).status).toBe(200);
    expect((await say('ann', '10.0.0.1', { authorization: 'Bearer random-3' })).status).toBe(429);
    expect((await say('ann', '10.0.0.1')).status).toBe(429);
  });

  it('with gateway.authToken, the token from each address has its own bucket', async () => {
    await start({ authToken: 'secret-token' });
    const bearer = { authorization: 'Bearer secret-token' };
    expect((await say('ann', '10.0.0.1', bearer)).status).toBe(200);
    expect((await say('ann', '10.0.0.1', bearer)).status).toBe(200);
    expect((await say('ann', '10.0.0.1', bearer)).status).toBe(429);
    expect((await say('ann', '10.0.0.2', bearer)).status).toBe(200);
    expect((await say('ann', '10.0.0.2', bearer)).status).toBe(200);
    expect((await say('ann', '10.0.0.2', bearer)).status).toBe(429);
    expect((await say('ann', '10.0.0.3', { authorization: 'Bearer wrong' })).status).toBe(401);
  });
});
