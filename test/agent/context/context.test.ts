import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pairToolCalls } from '../../../src/agent/context/context.ts';
import { z } from 'zod';
import { defineTool } from '../../../src/tools/tool.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import type { RunningGateway } from '../../../src/main.ts';
import type { TranscriptMessage } from '../../../src/sessions/transcript.ts';
import type { FakeReply, RecordedRequest } from '../../fakes/fake-openai.ts';
import { startTestGateway } from '../../helpers/gateway.ts';
import { defaultReply, kindOf, startHarness, type Harness } from '../harness.ts';
import { useTempDir, useFakeOpenAI } from '../../helpers/fixtures.ts';

function commonPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/** Where the messages array of a raw body ends (just before its closing bracket). */
function messagesEnd(r: RecordedRequest): number {
  const json = JSON.stringify(r.body.messages);
  const at = r.raw.indexOf(json);
  expect(at).toBeGreaterThan(0);
  return at + json.length - 1;
}

describe('request assembly through the gateway', () => {
  const fake = useFakeOpenAI((r) => ({ content: `You said: ${r.body.messages.at(-1)?.content}`, usage: { prompt_tokens: 500, completion_tokens: 5 } }));
  const tmp = useTempDir();
  let gw: RunningGateway | undefined;
  const clock = new ManualClock('2026-05-04T08:00:00Z');

  beforeEach(async () => {
    const ws = path.join(tmp.dir, 'workspace');
    mkdirSync(ws, { recursive: true });
    writeFileSync(path.join(ws, 'AGENTS.md'), '# Rules\nAnswer briefly. Never reveal the launch code.');
    writeFileSync(path.join(ws, 'SOUL.md'), `You are calm.\n${'Be kind. '.repeat(400)}`);
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const post = (text: string) => fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text }) })
    .then((r) => r.json() as Promise<{ reply: string; sessionKey: string }>);

  it('consecutive requests of a session share a byte-identical prefix: each extends the previous one', async () => {
    gw = await startTestGateway({
      dir: tmp.dir, clock,
      config: { providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test' } }, agents: { defaults: { bootstrapMaxChars: 1000 } }, session: { reset: { mode: 'off', timezone: 'Europe/Paris' } } },
    });
    for (const text of ['first', 'second', 'third', 'fourth']) {
      await post(text);
      clock.advance(61_000);
    }
    expect(fake.requests).toHaveLength(4);
    for (let i = 1; i < fake.requests.length; i++) {
      const prev = fake.requests[i - 1]!;
      const next = fake.requests[i]!;
      // The whole previous messages array is the start of the next one, byte for byte...
      expect(JSON.stringify(next.body.messages.slice(0, prev.body.messages.length))).toBe(JSON.stringify(prev.body.messages));
      // ...and so is the raw request body up to the end of the previous messages.
      expect(commonPrefix(prev.raw, next.raw)).toBeGreaterThanOrEqual(messagesEnd(prev));
    }
    const last = fake.requests.at(-1)!.body.messages;
    // Stable first: identity, tools, bootstrap files (cut to their limit), session facts; the user message is last.
    const system = last[0]!.content!;
    expect(system.indexOf('You are Switchboard')).toBe(0);
    expect(system.indexOf('You have no tools')).toBeLessThan(system.indexOf('## AGENTS.md'));
    expect(system).toContain('Never reveal the launch code.');
    expect(system).toContain('truncated SOUL.md');
    expect(system).toContain('[missing: USER.md is not in the workspace]');
    expect(system).not.toMatch(/2026-05-04/);
    // Each user message starts with the time it was sent, in the session's zone; only the first message is a system one.
    expect(last.at(-1)).toEqual({ role: 'user', content: '[Runtime] Mon, 2026-05-04, 10:03 (Europe/Paris)\nfourth' });
    expect(last.slice(1).every((m) => m.role !== 'system')).toBe(true);
    const times = last.filter((m) => m.role === 'user').map((m) => /^\[Runtime\] .*(\d\d:\d\d) \(/.exec(m.content!)![1]);
    expect(times).toEqual(['10:00', '10:01', '10:02', '10:03']);
  });
});

describe('request assembly in a tool loop', () => {
  let h: Harness | undefined;
  afterEach(async () => { await h?.close(); h = undefined; });

  it('the requests of one turn extend each other, and the next turn extends them', async () => {
    let n = 0;
    const tools = [defineTool({ name: 'clock', group: 'test', description: 'tells the time', schema: z.object({}), run: async () => `tick ${n}` })];
    h = await startHarness({
      tools,
      reply: (r): FakeReply => {
        if (kindOf(r) !== 'turn') return defaultReply(r);
        const tools = r.body.messages.filter((m) => m.role === 'tool').length;
        return tools < 2 * (r.body.messages.filter((m) => m.role === 'user').length) ? { toolCalls: [{ id: `c${++n}`, name: 'clock', arguments: '{}' }], usage: null } : { content: 'done', usage: null };
      },
    });
    await h.send('what time is it?');
    h.clock.advance(30_000);
    await h.send('and now?');
    const requests = h.fake.requests;
    expect(requests).toHaveLength(6);
    for (let i = 1; i < requests.length; i++) {
      const prev = requests[i - 1]!.body.messages;
      expect(JSON.stringify(requests[i]!.body.messages.slice(0, prev.length))).toBe(JSON.stringify(prev));
      expect(requests[i]!.body.tools).toEqual(requests[0]!.body.tools);
    }
  });
});

describe('pairToolCalls', () => {
  const at = '2026-01-01T00:00:00Z';
  const m = (id: string, role: TranscriptMessage['role'], content: string, extra: Partial<TranscriptMessage> = {}): TranscriptMessage => ({ type: 'message', id, role, content, at, ...extra });
  it('drops orphan tool results and unanswered tool calls, which providers reject', () => {
    const out = pairToolCalls([
      m('t0', 'tool', 'orphan', { toolCallId: 'gone' }),
      m('u1', 'user', 'go'),
      m('a1', 'assistant', 'let me check', { toolCalls: [{ id: 'c1', name: 'x', arguments: '{}' }] }),
      m('u2', 'user', 'stop'),
      m('a2', 'assistant', '', { toolCalls: [{ id: 'c2', name: 'x', arguments: '{}' }] }),
      m('t2', 'tool', 'ok', { toolCallId: 'c2' }),
    ]);
    expect(out.map((x) => [x.id, x.toolCalls?.length ?? 0])).toEqual([['u1', 0], ['a1', 0], ['u2', 0], ['a2', 1], ['t2', 0]]);
  });
});
