import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkProviders } from '../../src/cli/doctor-providers.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../fakes/fake-anthropic.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { tempDir, testConfig } from '../helpers/gateway.ts';

// `switchboard doctor` probes each provider through its own client, with each key (SPEC §18).
describe('doctor: providers', () => {
  let openai: FakeOpenAI;
  let claude: FakeAnthropic;
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(async () => {
    [openai, claude] = await Promise.all([startFakeOpenAI(), startFakeAnthropic()]);
    tmp = tempDir();
  });
  afterEach(async () => {
    await Promise.all([openai.close(), claude.close()]);
    tmp.remove();
  });
  const check = (providers: Record<string, unknown>, completion = false) =>
    checkProviders(testConfig(tmp.dir, { providers, agents: { defaults: { provider: Object.keys(providers)[0] } } }), { completion });

  it('lists the models with every key, names a refused key by its place (never the key), and finds a missing model', async () => {
    claude.apiKey = 'sk-ant-good-key';
    const [result] = await check({ claude: { kind: 'anthropic', baseUrl: claude.baseURL, apiKey: 'sk-ant-good-key', apiKeys: ['sk-ant-bad-key'], model: 'claude-test-1', models: ['claude-test-2'] } });
    expect(result).toMatchObject({ name: 'provider claude', ok: 'warn' });
    expect(result!.detail).toMatch(/^anthropic http:\/\/127\.0\.0\.1:\d+ answers; 1 of 2 keys work \(key 2: it refused the key \(HTTP 401\): check providers\.claude\.apiKey \/ apiKeys\); models claude-test-1, claude-test-2 are available$/);
    expect(result!.detail).not.toContain('sk-ant');
    const [missing] = await check({ claude: { kind: 'anthropic', baseUrl: claude.baseURL, apiKey: 'sk-ant-good-key', model: 'claude-test-9' } });
    expect(missing).toMatchObject({ ok: false });
    expect(missing!.detail).toContain('not among its 2 models: claude-test-9 (it has claude-test-1, claude-test-2); fix providers.claude.model / models');
  });

  it('every key refused is a failure; --completion makes one 1-token call per key and says how long it took', async () => {
    claude.apiKey = 'sk-ant-other';
    const [refused] = await check({ claude: { kind: 'anthropic', baseUrl: claude.baseURL, apiKey: 'sk-ant-bad-one', apiKeys: ['sk-ant-bad-two'], model: 'claude-test-1' } });
    expect(refused).toMatchObject({ ok: false, detail: expect.stringMatching(/: every key failed; key 1: it refused the key \(HTTP 401\)/) });
    const [answered] = await check({ default: { baseUrl: openai.baseURL, apiKey: 'sk-open', model: 'gpt-test' } }, true);
    expect(answered).toMatchObject({ ok: true, detail: expect.stringMatching(/^openai http:\/\/127\.0\.0\.1:\d+\/v1 answers; model gpt-test is available; a 1-token completion on gpt-test answered in \d+ ms$/) });
    expect(openai.requests).toHaveLength(1);
    expect(openai.requests[0]!.body).toMatchObject({ model: 'gpt-test', max_completion_tokens: 1 });
    openai.script.push({ status: 503, error: { message: 'down' } });
    const [failed] = await check({ default: { baseUrl: openai.baseURL, apiKey: 'sk-open', model: 'gpt-test', maxRetries: 2 } }, true);
    expect(failed).toMatchObject({ ok: false, detail: expect.stringContaining('the completion failed: Provider "default" answered HTTP 503') });
    // A probe is not retried: one request, not three.
    expect(openai.requests).toHaveLength(2);
  });
});
