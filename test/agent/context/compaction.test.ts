import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { planCompaction } from '../../../src/agent/context/compaction.ts';
import { chatMessageTokens, countRequestTokens } from '../../../src/tokens/tokens.ts';
import { z } from 'zod';
import { defineTool } from '../../../src/tools/tool.ts';
import type { TranscriptCompaction, TranscriptMessage } from '../../../src/sessions/transcript.ts';
import { userText, type FakeReply, type RecordedRequest } from '../../fakes/fake-openai.ts';
import { defaultReply, fromWire, kindOf, startHarness, type Harness } from '../harness.ts';

const MODEL = 'gpt-test';
const words = (n: number, tag = 'word') => Array.from({ length: n }, (_, i) => `${tag}${i % 10}`).join(' ');
const requestTokens = (r: RecordedRequest) => countRequestTokens(r.body.messages.map(fromWire), [], MODEL);
/** The `[Runtime] <time>` line (with its newline) at the head of the last user message of a request. */
const runtimeLineOf = (r: RecordedRequest) => /^\[Runtime\][^\n]*\n/.exec(r.body.messages.at(-1)!.content ?? '')![0];
/**
 * Our count of the request after `last` had no compaction intervened: + the answer 'ok' and the user message
 * headed by its runtime line (the harness clock stands still, so it is the same line as the last one's).
 */
const wouldBeNext = (last: RecordedRequest, text: string) => requestTokens(last) + chatMessageTokens({ role: 'assistant', content: 'ok' }, MODEL)
  + chatMessageTokens({ role: 'user', content: `${runtimeLineOf(last)}${text}` }, MODEL);
const compactions = (h: Harness) => h.fileEntries().filter((e): e is TranscriptCompaction => e.type === 'compaction');
const small = { providers: { default: { contextWindow: 3000 } }, agents: { defaults: { compaction: { reserveTokens: 1000, keepRecentTokens: 400, memoryFlush: false }, contextPruning: { mode: 'off' } } } };

describe('compaction', () => {
  let h: Harness | undefined;
  afterEach(async () => { await h?.close(); h = undefined; });

  it('triggers when the next request would pass contextWindow - reserveTokens, and not before', async () => {
    h = await startHarness({ config: small });
    const threshold = 3000 - 1000;
    let turns = 0;
    while (!h.fake.requests.some((r) => kindOf(r) === 'compaction') && turns < 60) {
      await h.send(`message ${turns}: ${words(120)}`);
      turns++;
    }
    const kinds = h.fake.requests.map(kindOf);
    const first = kinds.indexOf('compaction');
    expect(first).toBeGreaterThan(1);
    const before = h.fake.requests.slice(0, first);
    expect(before.every((r) => kindOf(r) === 'turn')).toBe(true);
    // Every request sent before the compaction was at or under the threshold...
    for (const r of before) expect(requestTokens(r)).toBeLessThanOrEqual(threshold);
    // ...and the request that would have been sent without it was over: the last request, plus its answer,
    // the new user message and its runtime line.
    const last = before.at(-1)!;
    const lastUser = `message ${turns - 1}: ${words(120)}`;
    expect(wouldBeNext(last, lastUser)).toBeGreaterThan(threshold);

    // The turn then went out compacted: summary + the recent tail, under the threshold.
    const after = h.fake.requests.at(-1)!;
    expect(kindOf(after)).toBe('turn');
    // The summary is part of the one system message, at the head of the request.
    expect(after.body.messages.filter((m) => m.role === 'system')).toHaveLength(1);
    expect(after.body.messages[0]).toMatchObject({ role: 'system' });
    expect(after.body.messages[0]!.content).toContain('Summary of the earlier conversation');
    expect(after.body.messages.at(-1)!.role).toBe('user');
    expect(userText(after.body.messages.at(-1)!.content)).toBe(lastUser);
    expect(requestTokens(after)).toBeLessThan(threshold);
    const entry = h.session().entry;
    expect(entry.compactionCount).toBe(1);
    const [record] = compactions(h);
    expect(record).toMatchObject({ type: 'compaction', summary: expect.stringContaining('## Decisions') });
    expect(record!.tokensBefore).toBeGreaterThan(threshold);
    expect(record!.tokensAfter).toBeLessThan(record!.tokensBefore);
    // The full history stays on disk.
    expect(h.fileEntries().filter((e) => e.type === 'message' && e.role === 'user')).toHaveLength(turns);
  });

  it('uses the calibration factor learned from reported prompt_tokens for the threshold', async () => {
    h = await startHarness({
      config: small,
      reply: (r): FakeReply => (kindOf(r) === 'turn' ? { content: 'ok', usage: { prompt_tokens: Math.round(requestTokens(r) * 1.5), completion_tokens: 1 } } : defaultReply(r)),
    });
    let turns = 0;
    while (!h.fake.requests.some((r) => kindOf(r) === 'compaction') && turns < 60) {
      await h.send(`message ${turns}: ${words(120)}`);
      turns++;
    }
    const first = h.fake.requests.findIndex((r) => kindOf(r) === 'compaction');
    const last = h.fake.requests[first - 1]!;
    // Our own count would still have been under the threshold; the calibrated one (×1.5) was over it.
    const wouldBe = wouldBeNext(last, `message ${turns - 1}: ${words(120)}`);
    expect(wouldBe).toBeLessThan(2000);
    expect(wouldBe * 1.5).toBeGreaterThan(2000);
    expect(h.runtime.contextEngine.calibration.factor('default/gpt-test')).toBeCloseTo(1.5, 2);
    // The session's context size is what the provider reported for the last request.
    expect(h.session().entry.contextTokens).toBe(Math.round(requestTokens(h.fake.requests.at(-1)!) * 1.5));
  });

  it('keeps the recent tail verbatim and never separates a tool call from its result', async () => {
    let call = 0;
    const tools = [defineTool({ name: 'lookup', group: 'test', description: 'looks things up', schema: z.object({ q: z.string() }), run: async (args) => `result for ${JSON.stringify(args)}: ${words(90, 'fact')}` })];
    h = await startHarness({
      config: small, tools,
      reply: (r): FakeReply => {
        if (kindOf(r) !== 'turn') return defaultReply(r);
        const last = r.body.messages.at(-1)!;
        const steps = r.body.messages.filter((m) => m.role === 'tool').length;
        if (last.role === 'user' || (last.role === 'tool' && steps % 2 === 1)) {
          return { toolCalls: [{ id: `call_${++call}`, name: 'lookup', arguments: JSON.stringify({ q: `item ${call}` }) }], usage: null };
        }
        return { content: `done after ${steps} lookups`, usage: null };
      },
    });
    for (let i = 0; i < 12 && (i === 0 || compactions(h).length === 0); i++) await h.send(`question ${i}`);
    const [record] = compactions(h);
    expect(record).toBeDefined();
    const messages = h.fileEntries().filter((e): e is TranscriptMessage => e.type === 'message');
    const firstKept = messages.findIndex((m) => m.id === record!.firstKeptId);
    expect(firstKept).toBeGreaterThan(0);
    expect(messages[firstKept]!.role).not.toBe('tool');

    // Every request after the compaction: each tool result follows its call, each call has its result.
    const index = h.fake.requests.findIndex((r) => kindOf(r) === 'compaction');
    const later = h.fake.requests.slice(index).filter((r) => kindOf(r) === 'turn');
    expect(later.length).toBeGreaterThan(0);
    for (const r of later) {
      const open = new Set<string>();
      for (const m of r.body.messages) {
        if (m.role === 'assistant') for (const c of (m.tool_calls ?? []) as { id: string }[]) open.add(c.id);
        if (m.role === 'tool') {
          expect(open.has(m.tool_call_id!)).toBe(true);
          open.delete(m.tool_call_id!);
        }
      }
      expect(open.size).toBe(0);
    }
    // The first turn request after the compaction carries the transcript from firstKeptId on, verbatim.
    const firstAfter = later[0]!;
    expect(firstAfter.body.messages[0]!.content).toContain('Summary of the earlier conversation');
    const tail = firstAfter.body.messages.slice(1).map((m) => (m.role === 'user' ? { ...m, content: userText(m.content) } : m));
    const expected = messages.slice(firstKept, firstKept + tail.length);
    expect(tail.map((m) => [m.role, m.content ?? ''])).toEqual(expected.map((m) => [m.role, m.content]));
  });

  it('summarizes a 300-turn history in stages and merges the parts, keeping identifiers from every part', async () => {
    h = await startHarness({
      config: { providers: { default: { contextWindow: 6000 } }, agents: { defaults: { compaction: { reserveTokens: 1000, keepRecentTokens: 500, memoryFlush: false }, contextPruning: { mode: 'off' } } } },
      reply: (r): FakeReply => {
        if (kindOf(r) !== 'compaction') return defaultReply(r);
        const text = r.body.messages.map((m) => m.content ?? '').join('\n');
        const ids = [...new Set(text.match(/\b[A-Z]{3}-\d{3}\b/g) ?? [])].sort();
        return { content: `## Decisions\n- none\n## Exact identifiers\n${ids.length ? ids.map((id) => `- ${id}`).join('\n') : '- none'}`, usage: null };
      },
    });
    await h.send('hello');
    await h.seed(300, (i) => `Turn ${i}. ${i === 3 ? 'Please track ticket ABC-123. ' : ''}${i === 290 ? 'The order is XYZ-999. ' : ''}${words(50, 'chat')}`);
    const reply = await h.send('/compact');
    expect(reply).toMatch(/^Compacted: [\d,]+ → [\d,]+ tokens$/);
    const summaryRequests = h.fake.requests.filter((r) => kindOf(r) === 'compaction');
    const parts = summaryRequests.filter((r) => /Summarize part \d+ of \d+/.test(r.body.messages[1]!.content ?? ''));
    const merges = summaryRequests.filter((r) => (r.body.messages[1]!.content ?? '').includes('<summary part="1">'));
    expect(parts.length).toBeGreaterThanOrEqual(4);
    expect(merges.length).toBeGreaterThanOrEqual(1);
    expect(summaryRequests).toHaveLength(parts.length + merges.length);
    for (const r of summaryRequests) expect(requestTokens(r)).toBeLessThanOrEqual(6000 - 1000);
    const [record] = compactions(h);
    expect(record!.summary).toContain('ABC-123');
    expect(record!.summary).toContain('XYZ-999');
    const [x, y] = /Compacted: ([\d,]+) → ([\d,]+)/.exec(reply)!.slice(1).map((s) => Number(s.replace(/,/g, '')));
    expect(x).toBeGreaterThan(15_000);
    expect(y).toBeLessThan(1500);
    // The next turn is built from the summary and the tail.
    await h.send('what was the ticket?');
    const next = h.fake.requests.at(-1)!;
    expect(next.body.messages[0]!.content).toContain('Summary of the earlier conversation');
    expect(next.body.messages[0]!.content).toContain('ABC-123');
    expect(requestTokens(next)).toBeLessThan(1500);
  });

  it('a failed summary call leaves the session usable, and compaction is retried at the next turn', async () => {
    let failures = 1;
    h = await startHarness({
      config: small,
      reply: (r): FakeReply => (kindOf(r) === 'compaction' && failures-- > 0 ? { status: 500, error: { message: 'summarizer down' } } : defaultReply(r)),
    });
    await h.send('hello');
    await h.seed(20, (i) => `fact ${i}: ${words(100)}`);
    expect(await h.send('first try')).toBe('ok');
    expect(h.fake.requests.map(kindOf).slice(-2)).toEqual(['compaction', 'turn']);
    expect(compactions(h)).toHaveLength(0);
    expect(h.session().entry.compactionCount).toBe(0);
    // The turn went out with the whole history (no "summary unavailable" wipe).
    expect(h.fake.requests.at(-1)!.body.messages.filter((m) => m.role === 'user')).toHaveLength(22);

    expect(await h.send('second try')).toBe('ok');
    expect(h.fake.requests.map(kindOf).slice(-2)).toEqual(['compaction', 'turn']);
    expect(compactions(h)).toHaveLength(1);
    expect(h.session().entry.compactionCount).toBe(1);
    expect(h.fake.requests.at(-1)!.body.messages[0]!.content).toContain('Summary of the earlier conversation');
  });

  it('compacts and retries after a context-overflow error from the provider', async () => {
    let overflow = 1;
    h = await startHarness({
      config: { agents: { defaults: { compaction: { keepRecentTokens: 800, memoryFlush: false }, contextPruning: { mode: 'off' } } } },
      reply: (r): FakeReply => (kindOf(r) === 'turn' && overflow-- > 0
        ? { status: 400, error: { message: "This model's maximum context length is 4096 tokens.", code: 'context_length_exceeded' } }
        : defaultReply(r)),
    });
    await h.send('hello');
    overflow = 1;
    await h.seed(20, (i) => `fact ${i}: ${words(100)}`);
    expect(await h.send('still there?')).toBe('ok');
    const kinds = h.fake.requests.map(kindOf).slice(-3);
    expect(kinds).toEqual(['turn', 'compaction', 'turn']);
    const [failed, , retried] = h.fake.requests.slice(-3);
    expect(requestTokens(retried!)).toBeLessThan(requestTokens(failed!) / 2);
    expect(compactions(h)).toHaveLength(1);
  });

  it('gives up after 3 compact-and-retry rounds with a clear message, and the session still works after', async () => {
    let broken = true;
    h = await startHarness({
      config: { agents: { defaults: { compaction: { keepRecentTokens: 2000, memoryFlush: false }, contextPruning: { mode: 'off' } } } },
      reply: (r): FakeReply => (kindOf(r) === 'turn' && broken
        ? { status: 400, error: { message: 'too long', code: 'context_length_exceeded' } }
        : defaultReply(r)),
    });
    broken = false;
    await h.send('hello');
    await h.seed(40, (i) => `fact ${i}: ${words(100)}`);
    broken = true;
    const reply = await h.send('are you there?');
    expect(reply).toBe("This conversation no longer fits in the model's context window, even after compacting it 3 times. Start a new session with /new, or send a shorter message.");
    const since = h.fake.requests.slice(1).map(kindOf);
    expect(since).toEqual(['turn', 'compaction', 'turn', 'compaction', 'turn', 'compaction', 'turn']);
    expect(since.filter((k) => k === 'turn')).toHaveLength(4);
    expect(compactions(h)).toHaveLength(3);
    broken = false;
    expect(await h.send('and now?')).toBe('ok');
  });
});

describe('planCompaction', () => {
  const at = '2026-01-01T00:00:00Z';
  const msg = (role: TranscriptMessage['role'], content: string, extra: Partial<TranscriptMessage> = {}): TranscriptMessage => ({ type: 'message', id: randomUUID(), role, content, at, ...extra });

  it('moves the cut back to the tool call when it would land on a tool result', () => {
    const big = words(200);
    const list = [
      msg('user', big), msg('assistant', big),
      msg('user', 'look it up'),
      msg('assistant', '', { toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{}' }, { id: 'c2', name: 'lookup', arguments: '{}' }] }),
      msg('tool', big, { toolCallId: 'c1' }), msg('tool', words(20), { toolCallId: 'c2' }),
      msg('assistant', 'found it'), msg('user', 'thanks'),
    ];
    // A budget that reaches back into the tool results.
    const budget = chatMessageTokens({ role: 'user', content: 'thanks' }, MODEL) + chatMessageTokens({ role: 'assistant', content: 'found it' }, MODEL) + chatMessageTokens({ role: 'tool', content: words(20) }, MODEL) + 5;
    const plan = planCompaction(list, budget, MODEL)!;
    expect(plan.keep[0]!.role).toBe('assistant');
    expect(plan.keep[0]!.toolCalls).toHaveLength(2);
    expect(plan.summarize).toHaveLength(3);
    expect(plan.firstKeptId).toBe(list[3]!.id);
  });

  it('always keeps the last message group, and has nothing to do when everything fits the tail', () => {
    const list = [msg('user', 'a'), msg('assistant', 'b'), msg('user', words(500))];
    expect(planCompaction(list, 10, MODEL)!.keep).toEqual([list[2]]);
    expect(planCompaction(list, 10_000, MODEL)).toBeUndefined();
    expect(planCompaction([msg('user', 'only')], 0, MODEL)).toBeUndefined();
  });
});
