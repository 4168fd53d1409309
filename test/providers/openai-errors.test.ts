import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/core/errors.ts';
import { normalizeUsage, OpenAIProvider } from '../../src/providers/openai.ts';
import type { CallOptions } from '../../src/providers/types.ts';
import { startFakeOpenAI, type FakeOpenAI, type FakeReply } from '../fakes/fake-openai.ts';

// SPEC §18: the OpenAI provider's errors as failover reads them, per-call retries, reasoning tokens.

const fast = { 'retry-after-ms': '1' };

describe('OpenAI provider: errors, retries and usage', () => {
  let fake: FakeOpenAI;
  const provider = (options: { id?: string; apiKey?: string; maxRetries?: number; timeoutMs?: number; baseUrl?: string } = {}) => new OpenAIProvider({
    id: options.id ?? 'p', apiKey: options.apiKey ?? 'sk-test', baseUrl: options.baseUrl ?? fake.baseURL, model: 'gpt-test', contextWindow: 8000, maxTokens: 100,
    correlationHeader: 'x-correlation-id', maxRetries: options.maxRetries ?? 0, timeoutMs: options.timeoutMs ?? 5000,
  });
  let n = 0;
  const call = (p: OpenAIProvider, options: CallOptions = {}) =>
    p.complete({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], correlationId: `e${++n}` }, options);
  const failure = async (reply: FakeReply, p = provider(), options: CallOptions = {}) => {
    fake.script.push(reply);
    const error = await call(p, options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  };

  beforeEach(async () => { fake = await startFakeOpenAI(); });
  afterEach(() => fake.close());

  it('maps 429 to PROVIDER_RATE_LIMITED (retryable)', async () => {
    expect(await failure({ status: 429 })).toMatchObject({ code: 'PROVIDER_RATE_LIMITED', retryable: true, providerStatus: 429 });
  });

  it('maps 529 and an overloaded body to PROVIDER_OVERLOADED (retryable)', async () => {
    expect(await failure({ status: 529 })).toMatchObject({ code: 'PROVIDER_OVERLOADED', retryable: true, providerStatus: 529 });
    expect(await failure({ status: 503, error: { message: 'busy', type: 'overloaded_error' } })).toMatchObject({ code: 'PROVIDER_OVERLOADED', retryable: true, providerStatus: 503 });
    expect(await failure({ status: 500, error: { message: 'busy', code: 'overloaded' } })).toMatchObject({ code: 'PROVIDER_OVERLOADED', providerStatus: 500 });
    expect(await failure({ status: 500, error: { message: 'boom', type: 'server_error' } })).toMatchObject({ code: 'PROVIDER_FAILED', retryable: true, providerStatus: 500 });
  });

  it('maps a client timeout to PROVIDER_TIMEOUT (retryable), not to an unreachable server', async () => {
    const error = await failure({ delayMs: 5000, content: 'late' }, provider({ timeoutMs: 100 }));
    expect(error).toMatchObject({ code: 'PROVIDER_TIMEOUT', retryable: true });
    expect(error.message).toContain('"p" did not answer in time');
    expect(await failure({ status: 408 })).toMatchObject({ code: 'PROVIDER_TIMEOUT', retryable: true, providerStatus: 408 });
  });

  it('maps a refused connection to PROVIDER_UNAVAILABLE (retryable)', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const error = await call(provider({ baseUrl: `http://127.0.0.1:${port}/v1` })).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'PROVIDER_UNAVAILABLE', retryable: true });
  });

  it('says which setting holds a refused key, and never the key', async () => {
    const leak = { message: 'Incorrect API key provided: sk-secret-123456.' };
    for (const status of [401, 403]) {
      const own = await failure({ status, error: leak }, provider({ id: 'default', apiKey: 'sk-secret-123456' }));
      expect(own).toMatchObject({ code: 'PROVIDER_AUTH', retryable: false, providerStatus: status });
      expect(own.message).toContain('check OPENAI_API_KEY');
      const other = await failure({ status, error: leak }, provider({ id: 'deepseek', apiKey: 'sk-secret-123456' }));
      expect(other.message).toBe(`Provider "deepseek" refused the API key (HTTP ${status}); check providers.deepseek.apiKey.`);
      for (const message of [own.message, other.message]) expect(message).not.toContain('secret');
    }
  });

  it('keeps a context overflow and other 4xx as they were', async () => {
    expect(await failure({ status: 400, error: { message: 'too long', code: 'context_length_exceeded' } })).toMatchObject({ code: 'CONTEXT_OVERFLOW', providerStatus: 400 });
    expect(await failure({ status: 400, error: { message: 'bad schema' } })).toMatchObject({ code: 'PROVIDER_FAILED', retryable: false, providerStatus: 400 });
  });

  it("retries a call as often as the call's maxRetries says, else the provider's", async () => {
    const p = provider({ maxRetries: 2 });
    for (const [maxRetries, requests] of [[0, 1], [1, 2], [undefined, 3]] as const) {
      fake.requests.length = 0;
      for (let i = 0; i < 3; i++) fake.script.push({ status: 500, headers: fast });
      const error = await call(p, maxRetries === undefined ? {} : { maxRetries }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'PROVIDER_FAILED', retries: requests - 1 });
      expect(fake.requests).toHaveLength(requests);
      fake.script.length = 0;
    }
    fake.requests.length = 0;
    fake.script.push({ status: 429, headers: fast }, { content: 'not asked for' });
    const response = await call(p, { maxRetries: 0 }).catch((e: unknown) => e);
    expect(response).toMatchObject({ code: 'PROVIDER_RATE_LIMITED' });
    expect(fake.requests).toHaveLength(1);
  });

  it('reads reasoning tokens into the usage, plain and streamed', async () => {
    const usage = { prompt_tokens: 20, completion_tokens: 50, completion_tokens_details: { reasoning_tokens: 32 } };
    for (const onDelta of [undefined, () => undefined]) {
      fake.script.push({ content: 'ok', usage });
      expect((await call(provider(), onDelta ? { onDelta } : {})).usage).toEqual({ inputTokens: 20, outputTokens: 50, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 32 });
    }
    expect(normalizeUsage({ prompt_tokens: 1, completion_tokens: 2 })).toEqual({ inputTokens: 1, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0 });
    expect(normalizeUsage({ prompt_tokens: 1, completion_tokens: 2, completion_tokens_details: null })).not.toHaveProperty('reasoningTokens');
    expect(normalizeUsage({ prompt_tokens: 1, completion_tokens: 2, completion_tokens_details: { reasoning_tokens: 0 } })?.reasoningTokens).toBe(0);
  });
});
