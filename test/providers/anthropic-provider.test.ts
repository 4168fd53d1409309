import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AnthropicProvider, normalizeAnthropicUsage } from '../../src/providers/anthropic.ts';
import type { ProviderRequest } from '../../src/providers/types.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../fakes/fake-anthropic.ts';

const KEY = 'sk-ant-api03-secret-key-value';

describe('Anthropic provider: answers, streams, usage, retries', () => {
  let fake: FakeAnthropic;
  let provider: AnthropicProvider;
  const make = (maxRetries = 0) => new AnthropicProvider({
    id: 'claude', apiKey: KEY, baseUrl: fake.baseURL, model: 'claude-test-1', contextWindow: 200_000, maxTokens: 256,
    correlationHeader: 'X-Correlation-Id', maxRetries, timeoutMs: 5000,
  });
  const request = (text: string, extra: Partial<ProviderRequest> = {}): ProviderRequest => ({
    model: 'claude-test-1', correlationId: `corr-${text}`, messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: text }], ...extra,
  });

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    provider = make();
  });
  afterAll(() => fake.close());
  beforeEach(() => {
    fake.requests.length = 0;
    fake.script.length = 0;
    fake.resetCache();
  });

  it('has the anthropic kind and the configured model, window and max tokens', () => {
    expect(provider).toMatchObject({ kind: 'anthropic', id: 'claude', model: 'claude-test-1', contextWindow: 200_000, maxTokens: 256 });
    expect(provider).not.toHaveProperty('transcribe');
  });

  it('answers a plain call: text blocks joined, tool_use as tool calls, thinking dropped, stop reason mapped, model from the answer', async () => {
    fake.script.push({ content: 'The answer.', thinking: 'private reasoning', redactedThinking: true, toolCalls: [{ id: 'tu_1', name: 'lookup', input: { q: 'x', n: 2 } }], model: 'claude-test-1-20260101' });
    const result = await provider.complete(request('q'));
    expect(result).toMatchObject({
      content: 'The answer.', toolCalls: [{ id: 'tu_1', name: 'lookup', arguments: '{"q":"x","n":2}' }], finishReason: 'tool_calls', model: 'claude-test-1-20260101', retries: 0,
    });
    expect(JSON.stringify(result)).not.toContain('private reasoning');
    expect(fake.requests[0]!.body.stream).toBe(false);
    fake.script.push({ content: 'cut', stopReason: 'max_tokens' }, { content: 'x', stopReason: 'refusal' });
    expect((await provider.complete(request('len'))).finishReason).toBe('length');
    expect((await provider.complete(request('ref'))).finishReason).toBe('refusal');
    expect((await provider.complete(request('end'))).finishReason).toBe('stop');
  });

  it('streams text deltas only: thinking never reaches onDelta or the content; tool input pieces are joined', async () => {
    fake.script.push({
      content: 'Hello there, this streams.', thinking: 'secret plan in many words', redactedThinking: true,
      toolCalls: [{ id: 'tu_a', name: 'search', input: { query: 'long query text here', limit: 5 } }, { id: 'tu_b', name: 'noop', input: {} }], splitArguments: 3,
    });
    const deltas: string[] = [];
    const result = await provider.complete(request('s'), { onDelta: (d) => deltas.push(d) });
    expect(fake.requests[0]!.body.stream).toBe(true);
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.join('')).toBe('Hello there, this streams.');
    expect(result.content).toBe('Hello there, this streams.');
    expect(JSON.stringify({ result, deltas })).not.toMatch(/secret|sig-fake|cmVkYWN0ZWQ/);
    expect(result.toolCalls).toEqual([
      { id: 'tu_a', name: 'search', arguments: '{"query":"long query text here","limit":5}' },
      { id: 'tu_b', name: 'noop', arguments: '{}' },
    ]);
    expect(result.finishReason).toBe('tool_calls');
  });

  it('keeps streamed tool arguments that are not JSON as they came', async () => {
    fake.script.push({ toolCalls: [{ id: 'tu_x', name: 'f', arguments: '{"broken": ' }] });
    const result = await provider.complete(request('b'), { onDelta: () => undefined });
    expect(result.toolCalls).toEqual([{ id: 'tu_x', name: 'f', arguments: '{"broken": ' }]);
  });

  it('normalizes usage, cache reads and writes included, the same in plain and streamed calls', async () => {
    const usage = { input_tokens: 12, output_tokens: 34, cache_read_input_tokens: 5000, cache_creation_input_tokens: 700 };
    fake.script.push({ content: 'a', usage }, { content: 'b', usage });
    const want = { inputTokens: 12, outputTokens: 34, cacheReadTokens: 5000, cacheWriteTokens: 700 };
    expect((await provider.complete(request('u1'))).usage).toEqual(want);
    // Streamed: input side from message_start, output_tokens from message_delta.
    expect((await provider.complete(request('u2'), { onDelta: () => undefined })).usage).toEqual(want);
    expect(normalizeAnthropicUsage({ input_tokens: 3, output_tokens: 4, cache_read_input_tokens: null })).toEqual({ inputTokens: 3, outputTokens: 4, cacheReadTokens: 0, cacheWriteTokens: 0 });
    fake.script.push({ content: 'c', usage: null });
    expect((await provider.complete(request('u3'))).usage).toBeUndefined();
  });

  it('reports the simulated cache in both modes: the second identical call reads what the first wrote', async () => {
    const big = 'All work and no play makes the agent a dull agent. '.repeat(150);
    const call = (stream: boolean) => provider.complete({ model: 'claude-test-1', correlationId: 'c', messages: [{ role: 'system', content: big }, { role: 'user', content: 'hi' }] }, stream ? { onDelta: () => undefined } : {});
    const first = await call(false);
    expect(first.usage!.cacheWriteTokens).toBeGreaterThan(1024);
    expect(first.usage!.cacheReadTokens).toBe(0);
    const second = await call(true);
    expect(second.usage!.cacheReadTokens).toBe(first.usage!.cacheWriteTokens);
    expect(second.usage!.cacheWriteTokens).toBe(0);
    expect(second.usage!.inputTokens).toBe(first.usage!.inputTokens);
    expect(second.usage!.outputTokens).toBeGreaterThan(0);
  });

  it('sends the key, the correlation id in the configured header, and a placeholder key when none is configured', async () => {
    await provider.complete(request('h'));
    const headers = fake.requests[0]!.headers;
    expect(headers['x-correlation-id']).toBe('corr-h');
    expect(`${String(headers['x-api-key'] ?? '')}${String(headers.authorization ?? '')}`).toContain(KEY);
    const keyless = new AnthropicProvider({ id: 'local', apiKey: '', baseUrl: fake.baseURL, model: 'm', contextWindow: 1000, maxTokens: 10, correlationHeader: 'x-correlation-id', maxRetries: 0, timeoutMs: 5000 });
    expect((await keyless.complete(request('k'))).content).toBe('echo: k');
    expect(`${String(fake.requests[1]!.headers['x-api-key'] ?? '')}${String(fake.requests[1]!.headers.authorization ?? '')}`).toContain('not-needed');
  });

  it('counts the client\'s retries, and a call\'s maxRetries overrides the provider\'s (0 = one request only)', async () => {
    const retrying = make(2);
    fake.script.push({ status: 529, error: { type: 'overloaded_error', message: 'Overloaded' } }, { status: 500, error: { type: 'api_error', message: 'boom' } }, { content: 'third time' });
    const result = await retrying.complete(request('r'));
    expect(result).toMatchObject({ content: 'third time', retries: 2 });
    expect(fake.requests.map((r) => r.headers['x-correlation-id'])).toEqual(['corr-r', 'corr-r', 'corr-r']);

    fake.requests.length = 0;
    fake.script.push({ status: 429, error: { type: 'rate_limit_error', message: 'slow down' } }, { content: 'never reached' });
    await expect(retrying.complete(request('once'), { maxRetries: 0 })).rejects.toMatchObject({ code: 'PROVIDER_RATE_LIMITED', retries: 0 });
    expect(fake.requests).toHaveLength(1);
    fake.script.length = 0;

    fake.requests.length = 0;
    fake.script.push({ status: 429, error: { type: 'rate_limit_error', message: 'slow down' } }, { content: 'second' });
    expect(await provider.complete(request('more'), { maxRetries: 1 })).toMatchObject({ content: 'second', retries: 1 });
    expect(fake.requests).toHaveLength(2);
  });

  it('lists the models through GET /v1/models', async () => {
    expect(await provider.listModels()).toEqual(['claude-test-1', 'claude-test-2']);
  });
});
