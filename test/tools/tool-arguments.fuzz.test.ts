import { performance } from 'node:perf_hooks';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import type { InboundSink } from '../../src/core/channel-adapter.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { emptyTokens, type SessionEntry } from '../../src/sessions/entry.ts';
import type { SessionManager } from '../../src/sessions/manager.ts';
import { createToolRegistry } from '../../src/tools/index.ts';
import type { ToolCall } from '../../src/sessions/transcript.ts';
import { testConfig, tempDir } from '../helpers/gateway.ts';
import { manualTimers } from './timers.ts';

const tmp = tempDir();
afterAll(() => tmp.remove());

const entry = (key: string, extra: Partial<SessionEntry> = {}): SessionEntry => ({
  key, sessionId: 'sid', agentId: 'main', channel: 'webchat', accountId: 'default', chatType: 'direct', createdAt: 0, updatedAt: 0,
  sessionStartedAt: 0, state: 'active', runState: 'running', overrides: {}, tokens: emptyTokens(), contextTokens: 0, compactionCount: 0, messageCount: 0, ...extra,
});

describe('tool arguments are hostile input', () => {
  const config = testConfig(tmp.dir, { tools: { sessions: { visibility: 'all' } } });
  const caller = entry('agent:main:main');
  const others = [caller, entry('agent:main:subagent:abc', { parentKey: 'agent:main:main' })];
  const submitted: InboundMessage[] = [];
  const sink: InboundSink = async (message) => {
    submitted.push(message);
    return { status: 'accepted', correlationId: 'c', done: Promise.resolve({ sessionKey: message.internal!.sessionKey, sessionId: 's', correlationId: 'c', replies: [{ text: 'fine' }], usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }, usageEstimated: false, outcome: 'replied' }) };
  };
  const sessions = {
    acquire: async (init: { key: string }) => ({ key: init.key, holds: 1, entry: entry(init.key) }), release: () => undefined, save: async () => undefined,
  } as unknown as SessionManager;
  const registry = createToolRegistry({
    config, sessions, sink: () => sink, history: async () => [{ type: 'message', id: 'x', role: 'user', content: 'old', at: '2026-01-01T00:00:00Z' }],
    reader: { get: async (key) => others.find((e) => e.key === key), all: async function* () { yield* others; } },
    timeout: manualTimers().timeout,
  });
  const enabled = registry.schemasFor({ preset: 'full', allow: [], deny: [] });
  const names = [...registry.names(), 'nope', '', '__proto__', 'x'.repeat(500)];
  const context = {
    entry: caller, message: { id: 'm', channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: 'a', peerId: 'a', sender: { id: 'a' }, text: 't', attachments: [], mentionsBot: true, receivedAt: 0 } as InboundMessage,
    correlationId: 'c', signal: new AbortController().signal, logger: silentLogger(), workspace: `${tmp.dir}/ws`, timezone: 'UTC', now: () => 0,
    lendSlot: <T>(work: () => Promise<T>) => work(),
  };

  const raw = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
    fc.record({
      action: fc.oneof(fc.constantFrom('list', 'history', 'send', 'LIST'), fc.string()),
      sessionKey: fc.oneof(fc.constantFrom('agent:main:main', 'agent:main:subagent:abc', 'agent:x', '%%%', ''), fc.string()),
      message: fc.oneof(fc.string(), fc.integer()), prompt: fc.oneof(fc.string(), fc.constant(null)), note: fc.string(), query: fc.string(),
      limit: fc.oneof(fc.integer(), fc.double(), fc.string()), timeoutSeconds: fc.oneof(fc.integer({ min: -5, max: 10_000 }), fc.constant(Number.NaN)),
      label: fc.string(), agentId: fc.string(),
    }, { requiredKeys: [] }).map((v) => JSON.stringify(v)),
    fc.constantFrom('{"__proto__":{"polluted":true}}', '{"constructor":{"prototype":{"x":1}}}', '[]', 'null', '"{}"', '{"note":"' + 'a'.repeat(30_000) + '"}', '{'.repeat(5000), 'x'.repeat(300_000)),
  );

  it('2,000 generated calls: each ends as a result the model can read, none throws, none blocks the loop', async () => {
    let slowest = 0;
    await fc.assert(fc.asyncProperty(fc.constantFrom(...names), raw, async (name, args) => {
      const call: ToolCall = { id: 'c1', name, arguments: args };
      const t0 = performance.now();
      const outcome = await registry.execute(call, enabled, context);
      slowest = Math.max(slowest, performance.now() - t0);
      expect(typeof outcome.content).toBe('string');
      expect(outcome.content.length).toBeLessThanOrEqual(config.tools.maxResultChars + 100);
      expect(['ok', 'error', 'invalid_arguments', 'unknown_tool', 'not_enabled', 'timeout']).toContain(outcome.outcome);
    }), { numRuns: 2000 });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(slowest).toBeLessThan(250);
    // Internal messages were made only from arguments that passed validation.
    for (const m of submitted) expect(m.text.trim().length).toBeGreaterThan(0);
  }, 60_000);
});
