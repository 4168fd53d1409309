import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/core/errors.ts';
import { AnthropicProvider } from '../../src/providers/anthropic.ts';
import type { ProviderRequest } from '../../src/providers/types.ts';
import { startFakeAnthropic, type AnthropicFakeReply, type FakeAnthropic } from '../fakes/fake-anthropic.ts';

const KEY = 'sk-ant-api03-very-secret-key-0123456789';

describe('Anthropic provider: every failure is a ProviderError with the right code', () => {
  let fake: FakeAnthropic;
  const make = (options: { timeoutMs?: number; maxRetries?: number; baseUrl?: string } = {}) => new AnthropicProvider({
    id: 'claude', apiKey: KEY, baseUrl: options.baseUrl ?? fake.baseURL, model: 'claude-test-1', contextWindow: 200_000, maxTokens: 256,
    correlationHeader: 'x-correlation-id', maxRetries: options.maxRetries ?? 0, timeoutMs: options.timeoutMs ?? 5000,
  });
  const request: ProviderRequest = { model: 'claude-test-1', correlationId: 'err', messages: [{ role: 'user', content: 'hello there' }] };
  const failure = async (reply: AnthropicFakeReply, stream = false, provider = make()): Promise<ProviderError> => {
    fake.script.push(reply);
    const error: unknown = await provider.complete(request, stream ? { onDelta: () => undefined } : {}).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  };

  beforeAll(async () => { fake = await startFakeAnthropic(); });
  afterAll(() => fake.close());
  beforeEach(() => {
    fake.script.length = 0;
    fake.requests.length = 0;
    fake.apiKey = undefined;
  });

  it('429 rate_limit_error → PROVIDER_RATE_LIMITED, retryable, with the status', async () => {
    for (const stream of [false, true]) {
      expect(await failure({ status: 429, error: { type: 'rate_limit_error', message: 'Number of request tokens has exceeded your rate limit' } }, stream))
        .toMatchObject({ code: 'PROVIDER_RATE_LIMITED', retryable: true, providerStatus: 429, retries: 0 });
    }
  });

  it('529 overloaded_error → PROVIDER_OVERLOADED, retryable; after the retries, the retries are on the error', async () => {
    expect(await failure({ status: 529, error: { type: 'overloaded_error', message: 'Overloaded' } }))
      .toMatchObject({ code: 'PROVIDER_OVERLOADED', retryable: true, providerStatus: 529 });
    fake.script.push({ status: 529, error: { type: 'overloaded_error', message: 'Overloaded' } }, { status: 529, error: { type: 'overloaded_error', message: 'Overloaded' } });
    expect(await failure({ status: 529, error: { type: 'overloaded_error', message: 'Overloaded' } }, false, make({ maxRetries: 2 })))
      .toMatchObject({ code: 'PROVIDER_OVERLOADED', retries: 2 });
    expect(fake.requests).toHaveLength(4);
  });

  it('an overloaded_error event in the middle of a stream → PROVIDER_OVERLOADED, retryable', async () => {
    const deltas: string[] = [];
    fake.script.push({ content: 'partial answer that breaks', streamError: { type: 'overloaded_error', message: 'Overloaded' } });
    const error: unknown = await make().complete(request, { onDelta: (d) => deltas.push(d) }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'PROVIDER_OVERLOADED', retryable: true });
    expect(deltas).toEqual(['partial ']);
    expect(await failure({ content: 'x', streamError: { type: 'api_error', message: 'Internal error' } }, true)).toMatchObject({ code: 'PROVIDER_FAILED', retryable: true });
  });

  it('401/403 → PROVIDER_AUTH, not retryable, saying what to check and never quoting the key', async () => {
    fake.apiKey = 'the-right-key';
    const auth = await failure({ content: 'unused' });
    expect(auth).toMatchObject({ code: 'PROVIDER_AUTH', retryable: false, providerStatus: 401 });
    expect(auth.message).toMatch(/providers\.claude\.apiKey.*ANTHROPIC_API_KEY/);
    expect(auth.message).not.toContain(KEY);
    fake.apiKey = undefined;
    fake.script.length = 0;
    // A server that quotes the key back does not get it into our message either.
    const echoed = await failure({ status: 403, error: { type: 'permission_error', message: `key ${KEY} may not use this model` } });
    expect(echoed).toMatchObject({ code: 'PROVIDER_AUTH', providerStatus: 403 });
    expect(echoed.message).not.toContain(KEY);
  });

  it('400 prompt is too long → CONTEXT_OVERFLOW, not retryable; another 400 → PROVIDER_FAILED', async () => {
    expect(await failure({ status: 400, error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' } }))
      .toMatchObject({ code: 'CONTEXT_OVERFLOW', retryable: false, providerStatus: 400 });
    expect(await failure({ status: 400, error: { type: 'invalid_request_error', message: 'input length and `max_tokens` exceed context limit: 199000 + 8192 > 200000' } }, true))
      .toMatchObject({ code: 'CONTEXT_OVERFLOW' });
    expect(await failure({ status: 400, error: { type: 'invalid_request_error', message: 'messages.0.content: bad' } }))
      .toMatchObject({ code: 'PROVIDER_FAILED', retryable: false, providerStatus: 400 });
  });

  it('other 5xx → PROVIDER_FAILED, retryable, with the status', async () => {
    expect(await failure({ status: 503, error: { type: 'api_error', message: 'unavailable' } })).toMatchObject({ code: 'PROVIDER_FAILED', retryable: true, providerStatus: 503 });
    expect(await failure({ status: 404, error: { type: 'not_found_error', message: 'model: nope' } })).toMatchObject({ code: 'PROVIDER_FAILED', retryable: false, providerStatus: 404 });
  });

  it('an answer later than timeoutMs → PROVIDER_TIMEOUT, retryable', async () => {
    for (const stream of [false, true]) {
      const started = Date.now();
      expect(await failure({ content: 'late', delayMs: 3000 }, stream, make({ timeoutMs: 100 }))).toMatchObject({ code: 'PROVIDER_TIMEOUT', retryable: true });
      expect(Date.now() - started).toBeLessThan(2000);
    }
  });

  it('a server that is not there → PROVIDER_UNAVAILABLE, retryable', async () => {
    const closed: Server = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const error: unknown = await make({ baseUrl: `http://127.0.0.1:${port}` }).complete(request).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'PROVIDER_UNAVAILABLE', retryable: true });
  });

  it('the caller\'s abort → PROVIDER_ABORTED, before the answer and in the middle of a stream', async () => {
    const before = new AbortController();
    fake.script.push({ content: 'late', delayMs: 5000 });
    const pending = make().complete(request, { signal: before.signal });
    setTimeout(() => before.abort(), 50);
    await expect(pending).rejects.toMatchObject({ code: 'PROVIDER_ABORTED' });

    const during = new AbortController();
    fake.script.push({ content: 'one two three four five six seven eight', chunkDelayMs: 40 });
    const deltas: string[] = [];
    const streaming = make().complete(request, { signal: during.signal, onDelta: (d) => { deltas.push(d); if (deltas.length === 2) during.abort(); } });
    await expect(streaming).rejects.toMatchObject({ code: 'PROVIDER_ABORTED' });
    expect(deltas.length).toBeLessThan(8);
  });
});
