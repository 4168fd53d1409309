import { encode as encodeO200k } from 'gpt-tokenizer/encoding/o200k_base';
import { encode as encodeCl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { describe, expect, it } from 'vitest';
import { buildContext } from '../../../src/agent/context/context.ts';
import { TokenCalibration } from '../../../src/agent/context/token-calibration.ts';
import { chatMessageTokens, countRequestTokens, countTokens, encodingFor, MESSAGE_OVERHEAD } from '../../../src/tokens/tokens.ts';
import type { SessionEntry } from '../../../src/sessions/entry.ts';
import type { TranscriptEntry } from '../../../src/sessions/transcript.ts';

const english = 'The quick brown fox jumps over the lazy dog. Switchboard routes every message to a session.';
const chinese = '敏捷的棕色狐狸跳过了懒狗。每条消息都会被路由到一个会话,并由代理回答。';
const mixed = `${english}\n${chinese}\n\`\`\`ts\nconst x = await fetch("https://example.com/a?b=1");\n\`\`\``;

describe('tokens', () => {
  it('counts exactly what gpt-tokenizer encodes, for English, Chinese and code, in both encodings', () => {
    for (const text of [english, chinese, mixed, chinese.repeat(40)]) {
      expect(countTokens(text, 'gpt-4o')).toBe(encodeO200k(text).length);
      expect(countTokens(text, 'gpt-4')).toBe(encodeCl100k(text).length);
    }
    expect(countTokens(english, 'gpt-4o')).toBe(19);
    expect(countTokens('', 'gpt-4o')).toBe(0);
    // Not characters/4: Chinese costs far more per character than English.
    expect(countTokens(chinese, 'gpt-4o')).toBeGreaterThan(chinese.length / 4 * 2);
  });

  it('picks the encoding by model family, with o200k_base as the documented fallback', () => {
    expect(encodingFor('gpt-4')).toBe('cl100k_base');
    expect(encodingFor('gpt-4-turbo')).toBe('cl100k_base');
    expect(encodingFor('gpt-3.5-turbo')).toBe('cl100k_base');
    expect(encodingFor('openai/gpt-4-0613')).toBe('cl100k_base');
    expect(encodingFor('gpt-4o-mini')).toBe('o200k_base');
    expect(encodingFor('gpt-4.1')).toBe('o200k_base');
    expect(encodingFor('gpt-5')).toBe('o200k_base');
    expect(encodingFor('o3-mini')).toBe('o200k_base');
    expect(encodingFor('llama-3.1-70b-instruct')).toBe('o200k_base');
    expect(encodingFor('qwen2.5-72b')).toBe('o200k_base');
  });

  it('counts a message as its content, name and tool calls plus the per-message overhead', () => {
    expect(chatMessageTokens({ role: 'user', content: english }, 'gpt-4o')).toBe(MESSAGE_OVERHEAD + 19);
    const call = { id: 'call_1', name: 'read_file', arguments: '{"path":"/etc/hosts"}' };
    expect(chatMessageTokens({ role: 'assistant', content: '', toolCalls: [call] }, 'gpt-4o'))
      .toBe(MESSAGE_OVERHEAD + countTokens('read_file', 'gpt-4o') + countTokens(call.arguments, 'gpt-4o') + 3);
  });

  it('splits a request into components that add up to the count of the whole request', () => {
    const entry = { key: 'agent:main:main', channel: 'webchat', chatType: 'direct', overrides: {} } as unknown as SessionEntry;
    const at = '2026-01-01T00:00:00.000Z';
    const history: TranscriptEntry[] = [
      { type: 'message', id: 'u1', role: 'user', content: english, at },
      { type: 'message', id: 'a1', role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'search', arguments: '{"q":"fox"}' }], at },
      { type: 'message', id: 't1', role: 'tool', content: chinese, toolCallId: 'c1', at },
      { type: 'message', id: 'a2', role: 'assistant', content: 'Found it.', at },
      { type: 'message', id: 'u2', role: 'user', content: 'thanks', at },
    ];
    const tools = [{ name: 'search', description: 'web search', parameters: { type: 'object', properties: { q: { type: 'string' } } } }];
    const bootstrap = [{ name: 'AGENTS.md', path: '/w/AGENTS.md', status: 'ok' as const, rawChars: 11, injectedChars: 11, content: 'Be helpful.' }];
    const built = buildContext({ agent: { id: 'main', name: 'Switchboard', providerId: 'default', model: 'gpt-4o', fallbacks: [], workspace: '/w', tools: { preset: 'none', allow: [], deny: [] }, tokenBudget: 0, vision: 'auto' }, entry, history, model: 'gpt-4o', tools, now: 0, bootstrap, bootstrapLimits: { maxChars: 100, totalMaxChars: 100 } });
    expect(built.tokens).toBe(countRequestTokens(built.messages, tools, 'gpt-4o'));
    const c = built.components;
    expect(c.system + c.bootstrap + c.tools + c.history + c.toolResults + c.userInput).toBe(built.tokens);
    expect(c.toolResults).toBe(chatMessageTokens({ role: 'tool', content: chinese, toolCallId: 't1' }, 'gpt-4o'));
    expect(c.userInput).toBe(chatMessageTokens({ role: 'user', content: 'thanks' }, 'gpt-4o'));
    expect(c.bootstrap).toBeGreaterThan(countTokens('Be helpful.', 'gpt-4o'));
    expect(c.tools).toBeGreaterThan(0);
  });
});

describe('token calibration', () => {
  it('learns a per-model factor from reported prompt tokens and applies it', () => {
    const cal = new TokenCalibration();
    expect(cal.factor('p/a')).toBe(1);
    for (let i = 0; i < 20; i++) cal.observe('p/a', 1200, 1000);
    expect(cal.factor('p/a')).toBeCloseTo(1.2, 2);
    expect(cal.apply('p/a', 5000)).toBe(6000);
    expect(cal.factor('p/b')).toBe(1);
    cal.observe('p/b', 900, 1000);
    expect(cal.factor('p/b')).toBeCloseTo(0.9, 5);
  });

  it('ignores reports that cannot be a tokenizer difference, and clamps the factor', () => {
    const cal = new TokenCalibration();
    expect(cal.observe('p/a', 10, 1000)).toBe(false);
    expect(cal.observe('p/a', 0, 1000)).toBe(false);
    expect(cal.factor('p/a')).toBe(1);
    for (let i = 0; i < 20; i++) cal.observe('p/a', 3500, 1000);
    expect(cal.factor('p/a')).toBe(2);
  });
});
