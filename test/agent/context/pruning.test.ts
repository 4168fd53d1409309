import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { applyPruning, planPruning, protectedFrom, pruningDue, SOFT_TRIM } from '../../../src/agent/context/pruning.ts';
import { z } from 'zod';
import { defineTool } from '../../../src/tools/tool.ts';
import type { TranscriptMessage } from '../../../src/sessions/transcript.ts';
import type { FakeReply, RecordedRequest } from '../../fakes/fake-openai.ts';
import { defaultReply, kindOf, startHarness, type Harness } from '../harness.ts';

const big = (tag: string) => `${tag}-head ${'x'.repeat(10_000)} ${tag}-tail`;
let calls = 0;
const tools = [defineTool({ name: 'fetch_page', group: 'test', description: 'fetches a page', schema: z.object({ url: z.string() }), run: async ({ url }) => big(url) })];
/** Each user message gets one tool call, then an answer. */
const toolThenAnswer = (r: RecordedRequest): FakeReply => {
  if (kindOf(r) !== 'turn') return defaultReply(r);
  const last = r.body.messages.at(-1)!;
  if (last.role === 'user') return { toolCalls: [{ id: `call_${++calls}`, name: 'fetch_page', arguments: JSON.stringify({ url: `page${calls}` }) }], usage: null };
  return { content: 'read it', usage: null };
};
const toolContents = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');
const pruningConfig = (mode: 'cache-ttl' | 'off') => ({ agents: { defaults: { contextPruning: { mode, ttl: '5m', keepLastAssistants: 3 } } } });

describe('pruning (cache-ttl)', () => {
  let h: Harness | undefined;
  afterEach(async () => { await h?.close(); h = undefined; });

  it('trims old tool results in the request once the TTL has passed; the transcript keeps them whole', async () => {
    h = await startHarness({ config: pruningConfig('cache-ttl'), tools, reply: toolThenAnswer });
    await h.send('read page one');
    await h.send('read page two');
    const warm = h.fake.requests.at(-1)!;
    expect(toolContents(warm).map((c) => c.length)).toEqual([big('page1').length, big('page2').length]);

    h.clock.advance(6 * 60_000);
    const mark = h.fake.requests.length;
    await h.send('read page three');
    const [first, second] = h.fake.requests.slice(mark);
    // page1's result is older than the last 3 assistant messages: trimmed to head + tail with a note.
    const [page1, page2] = toolContents(first!);
    expect(page1!.length).toBeLessThan(SOFT_TRIM.headChars + SOFT_TRIM.tailChars + 200);
    expect(page1).toContain('page1-head');
    expect(page1).toContain('page1-tail');
    expect(page1).toContain('tool result trimmed to save context');
    expect(page2).toBe(big('page2'));
    // The second request of the turn keeps the same decision, so it extends the first byte for byte.
    expect(JSON.stringify(second!.body.messages.slice(0, first!.body.messages.length))).toBe(JSON.stringify(first!.body.messages));

    // The next turn, inside the TTL, still sends the pruned form (the cached prefix stays valid).
    await h.send('and page four');
    const next = h.fake.requests.at(-2)!;
    expect(JSON.stringify(next.body.messages.slice(0, second!.body.messages.length))).toBe(JSON.stringify(second!.body.messages));

    // The transcript is untouched.
    const onDisk = h.fileEntries().filter((e): e is TranscriptMessage => e.type === 'message' && e.role === 'tool');
    expect(onDisk.map((m) => m.content)).toEqual([big('page1'), big('page2'), big('page3'), big('page4')]);
  });

  it('does nothing before the TTL or with mode "off"', async () => {
    h = await startHarness({ config: pruningConfig('cache-ttl'), tools, reply: toolThenAnswer });
    for (const text of ['one', 'two', 'three', 'four']) {
      h.clock.advance(4 * 60_000);
      await h.send(text);
    }
    expect(toolContents(h.fake.requests.at(-1)!).every((c) => c.length > 10_000)).toBe(true);
    await h.close();

    h = await startHarness({ config: pruningConfig('off'), tools, reply: toolThenAnswer });
    for (const text of ['one', 'two', 'three', 'four']) {
      h.clock.advance(60 * 60_000);
      await h.send(text);
    }
    expect(toolContents(h.fake.requests.at(-1)!).every((c) => c.length > 10_000)).toBe(true);
  });
});

describe('pruning decisions', () => {
  const at = '2026-01-01T00:00:00Z';
  const m = (role: TranscriptMessage['role'], content: string, extra: Partial<TranscriptMessage> = {}): TranscriptMessage => ({ type: 'message', id: randomUUID(), role, content, at, ...extra });
  const exchange = (i: number, size: number): TranscriptMessage[] => [
    m('user', `q${i}`), m('assistant', '', { toolCalls: [{ id: `c${i}`, name: 't', arguments: '{}' }] }), m('tool', 'r'.repeat(size), { toolCallId: `c${i}` }), m('assistant', `a${i}`),
  ];

  it('is due only after the TTL since the last request', () => {
    const s = { mode: 'cache-ttl' as const, ttl: 300_000, keepLastAssistants: 3 };
    expect(pruningDue(s, undefined, 1e9)).toBe(false);
    expect(pruningDue(s, 0, 299_999)).toBe(false);
    expect(pruningDue(s, 0, 300_000)).toBe(true);
    expect(pruningDue({ ...s, mode: 'off' }, 0, 1e9)).toBe(false);
  });

  it('protects the tool results after the last keepLastAssistants assistant messages', () => {
    const list = [...exchange(1, 10), ...exchange(2, 10)];
    expect(protectedFrom(list, 3)).toBe(3);
    expect(protectedFrom(list, 1)).toBe(7);
    expect(protectedFrom(list, 0)).toBe(list.length);
    expect(protectedFrom(list, 9)).toBe(0);
  });

  it('clears old tool results, oldest first, when trimming is not enough for the budget', () => {
    const list = [...exchange(1, 20_000), ...exchange(2, 20_000), ...exchange(3, 20_000), ...exchange(4, 100)];
    const settings = { mode: 'cache-ttl' as const, ttl: 0, keepLastAssistants: 2 };
    const roomy = planPruning(list, settings, { budgetTokens: 100_000, fixedTokens: 500, factor: 1, model: 'gpt-4o' });
    expect([...roomy.values()]).toEqual(['trim', 'trim', 'trim']);
    const tight = planPruning(list, settings, { budgetTokens: 1500, fixedTokens: 500, factor: 1, model: 'gpt-4o' });
    expect([...tight.entries()].map(([id, action]) => [list.findIndex((x) => x.id === id), action])).toEqual([[2, 'clear'], [6, 'clear'], [10, 'trim']]);
    const { history, stats } = applyPruning(list, tight);
    expect(stats).toEqual({ trimmed: 1, cleared: 2 });
    expect((history[2] as TranscriptMessage).content).toMatch(/^\[Old tool result cleared to save context \(20000 characters\)/);
    expect(history[0]).toBe(list[0]);
    expect(list[2]!.content).toHaveLength(20_000);
  });
});
