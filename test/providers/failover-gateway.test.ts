import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import type { RunningGateway } from '../../src/main.ts';
import { lastUser, startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { TestChannel } from '../helpers/test-channel.ts';

// SPEC §18 through the gateway: keys, then fallbacks; cooldowns on the injected clock; who answered in the
// ledger, /status and /metrics; /model is checked, stored across a restart, and does not fall back.
describe('failover through the gateway', () => {
  let primary: FakeOpenAI;
  let backup: FakeOpenAI;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;
  let channel: TestChannel;
  const clock = new ManualClock(Date.UTC(2026, 11, 2, 9));
  const keyOf = (r: RecordedRequest) => String(r.headers.authorization ?? '').replace(/^Bearer /, '');

  beforeEach(async () => {
    [primary, backup] = await Promise.all([startFakeOpenAI(), startFakeOpenAI()]);
    primary.fallback = (r) => ({ content: `primary answers "${lastUser(r)}"` });
    backup.fallback = (r) => ({ content: `backup answers "${lastUser(r)}"` });
    tmp = tempDir();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await Promise.all([primary.close(), backup.close()]);
    tmp.remove();
  });

  const start = async () => {
    channel = new TestChannel();
    gw = await startTestGateway({
      dir: tmp.dir, clock, adapters: [channel],
      config: {
        providers: {
          default: { baseUrl: primary.baseURL, apiKey: 'sk-primary-one', apiKeys: ['sk-primary-two'], model: 'gpt-primary', models: ['gpt-other'], maxRetries: 2 },
          backup: { baseUrl: backup.baseURL, apiKey: 'sk-backup-key', model: 'gpt-backup', maxRetries: 2 },
        },
        agents: { defaults: { fallbacks: ['backup/gpt-backup'] } },
        channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } },
      },
    });
    return gw;
  };
  const ask = async (text: string): Promise<string> => {
    const before = channel.sent.length;
    await channel.inject(text);
    await channel.waitForSent(before + 1);
    return channel.sent[before]!.message.text;
  };
  const rateLimited = { status: 429, error: { message: 'slow down', type: 'rate_limit_error' } };

  it('a rate-limited key moves to the next key, then to the fallback; cooled keys are skipped until their time', async () => {
    const g = await start();
    primary.script.push(rateLimited, rateLimited);
    expect(await ask('first')).toBe('backup answers "first"');
    // Each key once, without retrying in place while something else was left; then the fallback once.
    expect(primary.requests.map(keyOf)).toEqual(['sk-primary-one', 'sk-primary-two']);
    expect(backup.requests.map((r) => r.body.model)).toEqual(['gpt-backup']);
    const records = g.accounting.providers.recent();
    expect(records[0]).toMatchObject({ providerId: 'backup', modelId: 'gpt-backup' });
    const status = await g.status();
    expect(status.failovers).toMatchObject({ total: 2, byProvider: { default: 2 } });
    expect(status.failovers!.recent.map((f) => [f.from, f.to])).toEqual([['default/gpt-primary (key 2)', 'backup/gpt-backup'], ['default/gpt-primary', 'default/gpt-primary (key 2)']]);
    expect(status.failovers!.cooldowns.map((c) => [c.providerId, c.keyIndex, c.lastCode])).toEqual([['default', 0, 'PROVIDER_RATE_LIMITED'], ['default', 1, 'PROVIDER_RATE_LIMITED']]);
    expect(status.providers.find((p) => p.id === 'default')).toMatchObject({ errors: 2 });
    const metrics = await (await fetch(`${g.url}/metrics`)).text();
    expect(metrics).toContain('switchboard_provider_failovers_total{from="default",to="backup",code="PROVIDER_RATE_LIMITED"} 1');
    expect(metrics).toContain('switchboard_provider_keys_cooling_down 2');
    expect(await ask('/status')).toMatch(/^• failovers: 2 · latest \d\d:\d\d:\d\d UTC: default\/gpt-primary \(key 2\) → backup\/gpt-backup \(PROVIDER_RATE_LIMITED\)$/m);

    // Both primary keys cool down: the next turn goes straight to the fallback.
    expect(await ask('second')).toBe('backup answers "second"');
    expect(primary.requests).toHaveLength(2);
    // Past the cooldown the primary answers again, and a success clears its key's backoff.
    clock.advance(11_000);
    expect(await ask('third')).toBe('primary answers "third"');
    expect(primary.requests.map(keyOf).at(-1)).toBe('sk-primary-one');
    expect((await g.status()).failovers!.cooldowns).toEqual([]);
    // The success cleared key 1's backoff: failing again cools it for 10 s, not the 20 s of a second failure in a row.
    primary.script.push(rateLimited);
    expect(await ask('fourth')).toBe('primary answers "fourth"');
    expect(primary.requests.slice(-2).map(keyOf)).toEqual(['sk-primary-one', 'sk-primary-two']);
    expect((await g.status()).failovers!.cooldowns).toEqual([{ providerId: 'default', keyIndex: 0, until: new Date(clock.now() + 10_000).toISOString(), failures: 1, lastCode: 'PROVIDER_RATE_LIMITED' }]);
  });

  it('a request the provider refuses (400) is not failed over: the user gets the apology, the backup is never asked', async () => {
    await start();
    primary.script.push({ status: 400, error: { message: 'bad request', type: 'invalid_request_error' } });
    expect(await ask('hello')).toMatch(/^Sorry, something went wrong/);
    expect(backup.requests).toHaveLength(0);
    expect(primary.requests).toHaveLength(1);
  });

  it('/model is checked against what is configured, kept across a restart, and does not fall back', async () => {
    await start();
    expect(await ask('/model gpt-nope')).toMatch(/^Model "gpt-nope" is not configured; nothing changed\. 3 models are configured: default\/gpt-primary, default\/gpt-other, backup\/gpt-backup\.$/);
    expect(await ask('/model gpt-othre')).toMatch(/\(did you mean "gpt-other"\?\)/);
    expect(await ask('/model gpt-other')).toBe('Model set to default/gpt-other for this conversation. It does not fall back to other models; /model default goes back to the agent\'s.');
    await gw!.stop();
    await start();
    expect(await ask('/status')).toMatch(/^• model: default\/gpt-other \(chosen with \/model, no fallbacks\)$/m);
    expect(await ask('after restart')).toBe('primary answers "after restart"');
    expect(primary.requests.at(-1)!.body.model).toBe('gpt-other');
    // Both keys rate limited: the chosen model's failure is told, and the fallback is not asked. The last key
    // left is retried in place (maxRetries 2), as a call with nothing to fail over to always was.
    primary.script.push(rateLimited, rateLimited, rateLimited, rateLimited);
    const before = primary.requests.length;
    expect(await ask('again')).toBe('The model chosen for this conversation with /model, default/gpt-other, failed: the provider is rate limiting. It does not fall back to another model; try again later, or go back to the agent\'s model with /model default.');
    expect(backup.requests).toHaveLength(0);
    expect(primary.requests.slice(before).map(keyOf)).toEqual(['sk-primary-one', 'sk-primary-two', 'sk-primary-two', 'sk-primary-two']);
    clock.advance(11_000);
    expect(await ask('/model default')).toBe('Model set to default/gpt-primary, the agent\'s.');
    expect(await ask('/model')).toMatch(/^Model: default\/gpt-primary \(the agent's; fallbacks: backup\/gpt-backup\)\./);
  });
});
