import { describe, expect, it } from 'vitest';
import type { BootstrapFile } from '../../../src/agent/context/bootstrap.ts';
import { buildContext, type ContextInput } from '../../../src/agent/context/context.ts';
import { countRequestTokens } from '../../../src/tokens/tokens.ts';
import type { AgentConfig } from '../../../src/config/resolved.ts';
import type { ToolSchema } from '../../../src/providers/types.ts';
import type { SessionEntry } from '../../../src/sessions/entry.ts';
import type { TranscriptEntry } from '../../../src/sessions/transcript.ts';

const agent = { id: 'main', name: 'Switchboard', providerId: 'default', model: 'gpt-4o', workspace: '/w', tools: { preset: 'none', allow: [], deny: [] }, tokenBudget: 0 } as unknown as AgentConfig;
const search: ToolSchema = { name: 'search', description: 'web search', parameters: { type: 'object', properties: { q: { type: 'string' } } } };
const fetchTool: ToolSchema = { name: 'fetch', description: 'fetch a URL', parameters: { type: 'object', properties: { url: { type: 'string' } } } };
const file = (content: string): BootstrapFile => ({ name: 'AGENTS.md', path: '/w/AGENTS.md', status: 'ok', rawChars: content.length, injectedChars: content.length, content });
const user = (id: string, at: string, content = id): TranscriptEntry => ({ type: 'message', id, role: 'user', content, at });

function entryOf(): SessionEntry {
  return { key: 'agent:main:main', channel: 'webchat', chatType: 'direct', overrides: {} } as unknown as SessionEntry;
}

/** Everything a request is: messages, counts and components. */
const shape = (input: ContextInput) => {
  const built = buildContext(input);
  return { messages: built.messages, messageTokens: built.messageTokens, toolTokens: built.toolTokens, components: built.components, tokens: built.tokens };
};

describe('context assembly caches', () => {
  it('a session reuses its system message until an input changes, and then equals a fresh assembly', () => {
    const entry = entryOf();
    const history = [user('u1', '2026-05-04T08:03:00.000Z')];
    let input: ContextInput = { agent, entry, history, model: 'gpt-4o', tools: [search], now: 0, bootstrap: [file('Be helpful.')], bootstrapLimits: { maxChars: 100, totalMaxChars: 100 }, timezone: 'UTC' };
    const fresh = () => shape({ ...input, entry: structuredClone(input.entry) });
    const check = () => {
      const cached = shape(input);
      expect(cached).toEqual(fresh());
      expect(cached.tokens).toBe(countRequestTokens(cached.messages, input.tools, input.model));
      return cached.messages[0]!.content;
    };
    const first = check();
    expect(check()).toBe(first);

    entry.goal = 'ship the release';
    expect(check()).toContain('Standing goal of this conversation: ship the release');
    entry.overrides.systemPrompt = 'Answer like a pirate.';
    expect(check()).toContain('Answer like a pirate.');
    input = { ...input, tools: [search, fetchTool] };
    expect(check()).toContain('search, fetch.');
    input = { ...input, bootstrap: [file('Be brief.')] };
    expect(check()).toContain('Be brief.');
    input = { ...input, timezone: 'Europe/Paris', model: 'gpt-4' };
    expect(check()).toContain('model gpt-4; time zone Europe/Paris');
    input = { ...input, tools: [] };
    expect(check()).toContain('You have no tools in this session.');
  });

  it('gives every message of a minute the same runtime line, and the next minute its own', () => {
    const history = [
      user('u1', '2026-05-04T08:03:00.000Z'), user('u2', '2026-05-04T08:03:59.999Z'), user('u3', '2026-05-04T08:04:00.000Z'),
    ];
    const built = buildContext({ agent, entry: entryOf(), history, model: 'gpt-4o', tools: [], now: 0, timezone: 'Europe/Paris' });
    expect(built.messages.slice(1).map((m) => m.content)).toEqual([
      '[Runtime] Mon, 2026-05-04, 10:03 (Europe/Paris)\nu1',
      '[Runtime] Mon, 2026-05-04, 10:03 (Europe/Paris)\nu2',
      '[Runtime] Mon, 2026-05-04, 10:04 (Europe/Paris)\nu3',
    ]);
  });

  it('renders old times exactly, where a zone offset had seconds and a UTC minute spans two local ones', () => {
    // Liberia kept −0:44:30 until 1972: 00:00:29 UTC is 23:15:59 local, 00:00:31 UTC is 23:16:01.
    const history = [user('u1', '1970-01-01T00:00:29.000Z'), user('u2', '1970-01-01T00:00:31.000Z')];
    const built = buildContext({ agent, entry: entryOf(), history, model: 'gpt-4o', tools: [], now: 0, timezone: 'Africa/Monrovia' });
    expect(built.messages.slice(1).map((m) => m.content.split('\n')[0])).toEqual([
      '[Runtime] Wed, 1969-12-31, 23:15 (Africa/Monrovia)',
      '[Runtime] Wed, 1969-12-31, 23:16 (Africa/Monrovia)',
    ]);
  });

  it('renders a stored user message the same in every request, and again for another zone or model', () => {
    const entry = entryOf();
    const history = [user('u1', '2026-05-04T08:03:00.000Z', 'hello there')];
    const input: ContextInput = { agent, entry, history, model: 'gpt-4o', tools: [], now: 0, timezone: 'UTC' };
    const first = buildContext(input);
    const again = buildContext(input);
    expect(again.messages[1]).toEqual({ role: 'user', content: '[Runtime] Mon, 2026-05-04, 08:03 (UTC)\nhello there' });
    expect(again.messages[1]).toEqual(first.messages[1]);
    expect(again.components).toEqual(first.components);
    const paris = buildContext({ ...input, timezone: 'Europe/Paris' });
    expect(paris.messages[1]!.content).toBe('[Runtime] Mon, 2026-05-04, 10:03 (Europe/Paris)\nhello there');
    expect(paris.tokens).toBe(countRequestTokens(paris.messages, [], 'gpt-4o'));
    const other = buildContext({ ...input, model: 'gpt-4' });
    expect(other.tokens).toBe(countRequestTokens(other.messages, [], 'gpt-4'));
    expect(buildContext(input).messages[1]).toEqual(first.messages[1]);
  });

  it('shows the request time for a user message without a readable time, each request its own', () => {
    const history = [user('u1', 'not a time', 'hi')];
    const input: ContextInput = { agent, entry: entryOf(), history, model: 'gpt-4o', tools: [], now: Date.UTC(2026, 4, 4, 8, 3), timezone: 'UTC' };
    expect(buildContext(input).messages[1]!.content).toBe('[Runtime] Mon, 2026-05-04, 08:03 (UTC)\nhi');
    expect(buildContext({ ...input, now: Date.UTC(2026, 4, 4, 9, 30) }).messages[1]!.content).toBe('[Runtime] Mon, 2026-05-04, 09:30 (UTC)\nhi');
  });
});
