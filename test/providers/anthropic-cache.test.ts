import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AnthropicProvider } from '../../src/providers/anthropic.ts';
import type { ChatMessage, ProviderResponse, ToolSchema } from '../../src/providers/types.ts';
import { breakpointsOf, lastUserText, startFakeAnthropic, type FakeAnthropic, type RecordedAnthropicRequest } from '../fakes/fake-anthropic.ts';

const PROMPT = `You are Ada, an assistant reached through Switchboard.\n${'Rules: answer briefly, cite the workspace files you read, never guess a date. '.repeat(120)}`;
const TOOLS: ToolSchema[] = [
  { name: 'read_file', description: 'Reads a file of the workspace.', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
  { name: 'memory_search', description: 'Searches the memory notes.', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } },
];

/** A request's body without any `cache_control`, as JSON: what must stay the same from request to request. */
function withoutMarks(request: RecordedAnthropicRequest): { system: string; tools: string; messages: string[] } {
  const strip = (value: unknown): unknown => JSON.parse(JSON.stringify(value, (key, v: unknown) => (key === 'cache_control' ? undefined : v)));
  return { system: JSON.stringify(strip(request.body.system)), tools: JSON.stringify(strip(request.body.tools)), messages: request.body.messages.map((m) => JSON.stringify(strip(m))) };
}

describe('Anthropic provider: prompt-cache breakpoints keep the cache read turn after turn', () => {
  let fake: FakeAnthropic;
  let provider: AnthropicProvider;
  beforeAll(async () => {
    fake = await startFakeAnthropic((r) => ({ content: `Here is what I found about ${lastUserText(r).slice(0, 40)}: ${'details and more details, '.repeat(12)}done.` }));
    provider = new AnthropicProvider({
      id: 'claude', apiKey: 'sk-ant-test', baseUrl: fake.baseURL, model: 'claude-test-1', contextWindow: 200_000, maxTokens: 1024,
      correlationHeader: 'x-correlation-id', maxRetries: 0, timeoutMs: 5000,
    });
  });
  afterAll(() => fake.close());
  beforeEach(() => {
    fake.resetCache();
    fake.requests.length = 0;
    fake.script.length = 0;
  });

  it('a 10-turn conversation (with tool rounds) built by appending reads most of its input from the cache', async () => {
    const messages: ChatMessage[] = [{ role: 'system', content: PROMPT, cacheBreaks: [PROMPT.length] }];
    const byTurn: ProviderResponse[][] = [];
    for (let turn = 1; turn <= 10; turn++) {
      const responses: ProviderResponse[] = [];
      messages.push({ role: 'user', content: `[Runtime] 2026-12-02 09:${String(turn).padStart(2, '0')}\nQuestion ${turn}: what does file ${turn} say about the plan?` });
      if (turn % 3 === 0) fake.script.push({ toolCalls: [{ id: `tu_${turn}_a`, name: 'read_file', input: { path: `notes/${turn}.md` } }, { id: `tu_${turn}_b`, name: 'memory_search', input: { query: `plan ${turn}` } }] });
      for (;;) {
        const response = await provider.complete({ model: 'claude-test-1', messages, tools: TOOLS, correlationId: `t${turn}` }, turn % 2 ? {} : { onDelta: () => undefined });
        responses.push(response);
        messages.push({ role: 'assistant', content: response.content, ...(response.toolCalls.length ? { toolCalls: response.toolCalls } : {}) });
        if (!response.toolCalls.length) break;
        for (const call of response.toolCalls) messages.push({ role: 'tool', content: `result of ${call.name}: ${'a line of the file; '.repeat(30)}`, toolCallId: call.id });
      }
      byTurn.push(responses);
    }
    expect(fake.requests).toHaveLength(13);
    for (const request of fake.requests) expect(breakpointsOf(request).length).toBeLessThanOrEqual(4);

    // Every request repeats the previous one's blocks byte for byte (only where the breakpoints sit moves).
    for (let i = 1; i < fake.requests.length; i++) {
      const before = withoutMarks(fake.requests[i - 1]!);
      const after = withoutMarks(fake.requests[i]!);
      expect(after.system).toBe(before.system);
      expect(after.tools).toBe(before.tools);
      expect(after.messages.slice(0, before.messages.length)).toEqual(before.messages);
    }

    const later = byTurn.slice(1).flat().map((r) => r.usage!);
    const read = later.reduce((a, u) => a + u.cacheReadTokens, 0);
    const all = later.reduce((a, u) => a + u.cacheReadTokens + u.cacheWriteTokens + u.inputTokens, 0);
    const share = read / all;
    console.info(`anthropic cache: ${read} of ${all} input tokens read from cache over turns 2..10 (${(share * 100).toFixed(1)}%)`);
    expect(share).toBeGreaterThan(0.8);
    // Each later request reads at least all of the previous request's prompt.
    for (let i = 1; i < fake.requests.length; i++) {
      const previous = fake.requests[i - 1]!.cache!;
      expect(fake.requests[i]!.cache!.read).toBeGreaterThanOrEqual(previous.read + previous.write);
    }
  });

  it('the last stable history message is marked, so a wide round of tool calls does not lose the cached conversation', async () => {
    const messages: ChatMessage[] = [{ role: 'system', content: PROMPT }, { role: 'user', content: 'Read all twelve files, please.' }];
    const calls = Array.from({ length: 12 }, (_, i) => ({ id: `tu_${i}`, name: 'read_file', input: { path: `f${i}.md` } }));
    fake.script.push({ toolCalls: calls });
    const first = await provider.complete({ model: 'claude-test-1', messages, tools: TOOLS, correlationId: 'w1' });
    messages.push({ role: 'assistant', content: '', toolCalls: first.toolCalls });
    for (const call of first.toolCalls) messages.push({ role: 'tool', content: `contents of ${call.arguments}`, toolCallId: call.id });
    const second = await provider.complete({ model: 'claude-test-1', messages, tools: TOOLS, correlationId: 'w2' });
    // 12 tool_use + 12 tool_result blocks: the last message's breakpoint alone looks back only 20 blocks.
    expect(breakpointsOf(fake.requests[1]!)).toEqual(['system.0', 'messages.1.11', 'messages.2.11']);
    expect(second.usage!.cacheReadTokens).toBe(first.usage!.cacheReadTokens + first.usage!.cacheWriteTokens);
  });

  it('a prompt under the minimum cacheable size is neither written nor read', async () => {
    const messages: ChatMessage[] = [{ role: 'system', content: 'Short prompt.' }, { role: 'user', content: 'hi' }];
    const first = await provider.complete({ model: 'claude-test-1', messages, correlationId: 's1' });
    const second = await provider.complete({ model: 'claude-test-1', messages, correlationId: 's2' });
    expect([first.usage!.cacheWriteTokens, first.usage!.cacheReadTokens, second.usage!.cacheReadTokens]).toEqual([0, 0, 0]);
    expect(second.usage!.inputTokens).toBe(first.usage!.inputTokens);
  });
});
