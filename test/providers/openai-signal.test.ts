import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DIRECT_CALLS_PER_SIGNAL, OpenAIProvider } from '../../src/providers/openai.ts';
import type { ToolSchema } from '../../src/providers/types.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/fake-openai.ts';

describe('OpenAI provider: the caller signal and the tools of a request', () => {
  let fake: FakeOpenAI;
  let provider: OpenAIProvider;

  beforeEach(async () => {
    fake = await startFakeOpenAI();
    provider = new OpenAIProvider({
      id: 'p', apiKey: 'sk-test', baseUrl: fake.baseURL, model: 'gpt-test', contextWindow: 8000, maxTokens: 100,
      correlationHeader: 'x-correlation-id', maxRetries: 0, timeoutMs: 5000,
    });
  });
  afterEach(() => fake.close());

  const call = (text: string, signal?: AbortSignal, tools?: ToolSchema[]) =>
    provider.complete({ model: 'gpt-test', messages: [{ role: 'user', content: text }], correlationId: `c-${text}`, tools }, { signal });

  it('hangs at most 4 abort listeners on one caller signal however many calls it sees', async () => {
    const turn = new AbortController();
    for (let i = 0; i < 12; i++) expect((await call(`m${i}`, turn.signal)).content).toBe(`echo: m${i}`);
    expect(DIRECT_CALLS_PER_SIGNAL).toBe(4);
    expect(getEventListeners(turn.signal, 'abort')).toHaveLength(4);
  });

  it('aborts a call when the caller signal aborts, among the first calls of the signal and after them', async () => {
    for (const earlier of [0, 6]) {
      const turn = new AbortController();
      fake.fallback = () => ({ content: 'quick' });
      for (let i = 0; i < earlier; i++) await call(`w${i}`, turn.signal);
      fake.fallback = () => ({ content: 'late', delayMs: 5000 });
      const pending = call(`slow${earlier}`, turn.signal);
      await new Promise((resolve) => setTimeout(resolve, 50));
      turn.abort();
      await expect(pending).rejects.toMatchObject({ code: 'PROVIDER_ABORTED' });
    }
  });

  it('sends each tool schema wrapped as a function, the same for repeated calls with the same list', async () => {
    const tools: ToolSchema[] = [{ name: 'noop', description: 'does nothing', parameters: { type: 'object', properties: {} } }];
    await call('a', undefined, tools);
    await call('b', undefined, tools);
    await call('c', undefined, [...tools, { name: 'other', description: 'another', parameters: { type: 'object', properties: {} } }]);
    expect(fake.requests.map((r) => r.body.tools)).toEqual([
      [{ type: 'function', function: tools[0] }],
      [{ type: 'function', function: tools[0] }],
      [{ type: 'function', function: tools[0] }, { type: 'function', function: { name: 'other', description: 'another', parameters: { type: 'object', properties: {} } } }],
    ]);
    await call('d');
    expect(fake.requests[3]?.body.tools).toBeUndefined();
  });
});
