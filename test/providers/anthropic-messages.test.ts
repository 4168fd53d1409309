import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AnthropicProvider } from '../../src/providers/anthropic.ts';
import { MAX_CACHE_BREAKPOINTS, toAnthropicConversation, toAnthropicTools, toolInputOf } from '../../src/providers/anthropic-messages.ts';
import type { ChatMessage } from '../../src/providers/types.ts';
import { breakpointsOf, startFakeAnthropic, type FakeAnthropic } from '../fakes/fake-anthropic.ts';

const EPHEMERAL = { type: 'ephemeral' };
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==';

describe('Anthropic messages: ChatMessage[] → system + messages', () => {
  it('splits the system message at its cache breaks into text blocks, marking the prompt and the last summary', () => {
    const prompt = 'You are a helpful agent.';
    const s1 = '\n\n## Summary 1\nearlier';
    const s2 = '\n\n## Summary 2\nlater';
    const content = `${prompt}${s1}${s2}\n\nvolatile tail`;
    const { system } = toAnthropicConversation([
      { role: 'system', content, cacheBreaks: [prompt.length, prompt.length + s1.length, prompt.length + s1.length + s2.length] },
      { role: 'user', content: 'hi' },
    ]);
    expect(system).toEqual([
      { type: 'text', text: prompt, cache_control: EPHEMERAL },
      { type: 'text', text: s1 },
      { type: 'text', text: s2, cache_control: EPHEMERAL },
      { type: 'text', text: '\n\nvolatile tail' },
    ]);
    expect(system.map((b) => b.text).join('')).toBe(content);
  });

  it('sends a system message without breaks as one marked block, and ignores breaks out of range or out of order', () => {
    expect(toAnthropicConversation([{ role: 'system', content: 'abc' }, { role: 'user', content: 'x' }]).system)
      .toEqual([{ type: 'text', text: 'abc', cache_control: EPHEMERAL }]);
    expect(toAnthropicConversation([{ role: 'system', content: 'abcdef', cacheBreaks: [3, 2, 3, 99, 6] }, { role: 'user', content: 'x' }]).system)
      .toEqual([{ type: 'text', text: 'abc', cache_control: EPHEMERAL }, { type: 'text', text: 'def', cache_control: EPHEMERAL }]);
  });

  it('puts a user message\'s text first, then its images (data URLs as base64, https as url), with the name as a prefix', () => {
    const { messages } = toAnthropicConversation([
      { role: 'user', content: 'look', name: 'bob', images: [{ url: `data:image/png;base64,${PNG}`, tokens: 85 }, { url: 'https://example.com/cat.jpg', tokens: 85 }] },
    ]);
    expect(messages).toEqual([{
      role: 'user',
      content: [
        { type: 'text', text: '[bob]: look' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } , cache_control: EPHEMERAL },
      ],
    }]);
    // An image alone: no empty text block.
    expect(toAnthropicConversation([{ role: 'user', content: '', images: [{ url: 'https://e.com/a.png', tokens: 1 }] }]).messages[0]?.content)
      .toEqual([{ type: 'image', source: { type: 'url', url: 'https://e.com/a.png' }, cache_control: EPHEMERAL }]);
  });

  it('pairs tool calls with their results: tool_use blocks, then one user message of tool_result blocks (then what the user said)', () => {
    const { messages } = toAnthropicConversation([
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: 'Checking.', toolCalls: [{ id: 'c1', name: 'weather', arguments: '{"city":"Oslo"}' }, { id: 'c2', name: 'time', arguments: '' }] },
      { role: 'tool', content: 'rain', toolCallId: 'c1' },
      { role: 'tool', content: '', toolCallId: 'c2' },
      { role: 'user', content: 'and tomorrow?' },
    ]);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(messages[1]?.content).toEqual([
      { type: 'text', text: 'Checking.' },
      { type: 'tool_use', id: 'c1', name: 'weather', input: { city: 'Oslo' } },
      { type: 'tool_use', id: 'c2', name: 'time', input: {}, cache_control: EPHEMERAL },
    ]);
    expect(messages[2]?.content).toEqual([
      { type: 'tool_result', tool_use_id: 'c1', content: 'rain' },
      { type: 'tool_result', tool_use_id: 'c2' },
      { type: 'text', text: 'and tomorrow?', cache_control: EPHEMERAL },
    ]);
  });

  it('wraps tool arguments that are not a JSON object as { _raw } instead of failing', () => {
    expect(toolInputOf('{"a":1}')).toEqual({ a: 1 });
    expect(toolInputOf('{"a":')).toEqual({ _raw: '{"a":' });
    expect(toolInputOf('[1,2]')).toEqual({ _raw: '[1,2]' });
    expect(toolInputOf('"text"')).toEqual({ _raw: '"text"' });
    expect(toolInputOf('null')).toEqual({ _raw: 'null' });
    expect(toolInputOf('  ')).toEqual({});
  });

  it('leaves out an assistant message with no text and no tool calls, and whitespace-only text, merging the user messages around it', () => {
    const { messages } = toAnthropicConversation([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: '' },
      { role: 'user', content: 'two' },
      { role: 'assistant', content: '  \n' },
      { role: 'user', content: 'three' },
    ]);
    expect(messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }, { type: 'text', text: 'three', cache_control: EPHEMERAL }] }]);
  });

  it('maps tool schemas to name, description and input_schema', () => {
    expect(toAnthropicTools([{ name: 'n', description: 'd', parameters: { type: 'object', properties: {} } }]))
      .toEqual([{ name: 'n', description: 'd', input_schema: { type: 'object', properties: {} } }]);
  });

  it('marks the system prompt, the last summary, the last stable history message and the last message: never more than 4', () => {
    const conversation: ChatMessage[] = [{ role: 'system', content: 'P S1 S2', cacheBreaks: [1, 4, 7] }];
    for (let i = 0; i < 6; i++) {
      conversation.push({ role: 'user', content: `u${i}` }, { role: 'assistant', content: '', toolCalls: [{ id: `t${i}`, name: 'f', arguments: '{}' }] }, { role: 'tool', content: 'r', toolCallId: `t${i}` });
    }
    const { system, messages } = toAnthropicConversation(conversation);
    const marked = [
      ...system.flatMap((b, i) => (b.cache_control ? [`system.${i}`] : [])),
      ...messages.flatMap((m, i) => (m.content as { cache_control?: unknown }[]).flatMap((b, j) => (b.cache_control ? [`messages.${i}.${j}`] : []))),
    ];
    const last = messages.length - 1;
    expect(marked).toEqual(['system.0', 'system.2', `messages.${last - 1}.0`, `messages.${last}.0`]);
    expect(marked.length).toBeLessThanOrEqual(MAX_CACHE_BREAKPOINTS);
    // A conversation that ends with the assistant: the last-stable and the last breakpoint coincide, sent once.
    const ending = toAnthropicConversation([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }]);
    expect(ending.messages[1]?.content).toEqual([{ type: 'text', text: 'a', cache_control: EPHEMERAL }]);
    expect(ending.messages[0]?.content).toEqual([{ type: 'text', text: 'q' }]);
  });

  it('gives the same bytes for the same messages', () => {
    const build = (): ChatMessage[] => [
      { role: 'system', content: 'sys', cacheBreaks: [3] },
      { role: 'user', content: 'a', images: [{ url: `data:image/png;base64,${PNG}`, tokens: 1 }] },
      { role: 'assistant', content: 'b', toolCalls: [{ id: 'x', name: 'f', arguments: '{"k":[1,2]}' }] },
      { role: 'tool', content: 'c', toolCallId: 'x' },
    ];
    expect(JSON.stringify(toAnthropicConversation(build()))).toBe(JSON.stringify(toAnthropicConversation(build())));
  });
});

describe('Anthropic messages through the SDK: the fake (which refuses what the API refuses) takes them', () => {
  let fake: FakeAnthropic;
  let provider: AnthropicProvider;
  beforeAll(async () => {
    fake = await startFakeAnthropic();
    provider = new AnthropicProvider({
      id: 'claude', apiKey: 'sk-ant-test-key', baseUrl: fake.baseURL, model: 'claude-test-1', contextWindow: 200_000, maxTokens: 256,
      correlationHeader: 'x-correlation-id', maxRetries: 0, timeoutMs: 5000,
    });
  });
  afterAll(() => fake.close());
  beforeEach(() => { fake.requests.length = 0; });

  it('sends a tool round with broken arguments, an empty assistant turn, images and tools, and max_tokens', async () => {
    const result = await provider.complete({
      model: 'claude-test-1', correlationId: 'conv-1', maxTokens: 77,
      tools: [{ name: 'weather', description: 'the weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }],
      reasoningEffort: 'high',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: '' },
        { role: 'user', content: 'weather?', images: [{ url: `data:image/png;base64,${PNG}`, tokens: 85 }] },
        { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'weather', arguments: '{"city": "Os' }] },
        { role: 'tool', content: 'rain', toolCallId: 'c1' },
      ],
    });
    expect(result.content).toBe('echo: ');
    const body = fake.requests[0]!.body;
    expect(body.max_tokens).toBe(77);
    expect(body).not.toHaveProperty('thinking');
    expect(body).not.toHaveProperty('reasoning_effort');
    expect(body.tools).toEqual([{ name: 'weather', description: 'the weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }]);
    expect(body.system).toEqual([{ type: 'text', text: 'You are terse.', cache_control: EPHEMERAL }]);
    expect(body.messages[1]?.content).toEqual([{ type: 'tool_use', id: 'c1', name: 'weather', input: { _raw: '{"city": "Os' }, cache_control: EPHEMERAL }]);
    expect(breakpointsOf(fake.requests[0]!)).toEqual(['system.0', 'messages.1.0', 'messages.2.0']);
  });
});
