import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { summaryMessage } from '../../../src/agent/context/summary-blocks.ts';
import { SUMMARY_REQUEST_MARKER } from '../../../src/agent/context/summary-request.ts';
import { defineTool } from '../../../src/tools/tool.ts';
import { countTokens } from '../../../src/tokens/tokens.ts';
import type { TranscriptCompaction, TranscriptMessage } from '../../../src/sessions/transcript.ts';
import { textOf, type FakeReply, type RecordedRequest } from '../../fakes/fake-openai.ts';
import { defaultReply, kindOf, startHarness, type Harness } from '../harness.ts';

const words = (n: number, tag = 'word') => Array.from({ length: n }, (_, i) => `${tag}${i % 10}`).join(' ');
const KEY = /\bKEY-\d{4}\b/g;
const keysIn = (text: string) => [...new Set(text.match(KEY) ?? [])].sort();
const key = (i: number) => `KEY-${String(i).padStart(4, '0')}`;
/** A window of 4000 tokens: compacted over 3000, keeping a tail of about 800 (more than the summary instruction, so the summary request fits). */
const small = { providers: { default: { contextWindow: 4000 } }, agents: { defaults: { compaction: { reserveTokens: 1000, keepRecentTokens: 800, memoryFlush: false }, contextPruning: { mode: 'off' } } } };
const compactions = (h: Harness) => (h.sessions.peek(h.key) ? h.fileEntries().filter((e): e is TranscriptCompaction => e.type === 'compaction') : []);
const isPrefixRequest = (r: RecordedRequest) => textOf(r.body.messages.at(-1)?.content).includes(SUMMARY_REQUEST_MARKER);
const systemOf = (r: RecordedRequest) => r.body.messages[0]!.content ?? '';

function commonPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/** Where the first `count` messages of a request end in its raw body. */
function messagesEndAt(r: RecordedRequest, count: number): number {
  const json = JSON.stringify(r.body.messages.slice(0, count)).slice(0, -1);
  const at = r.raw.indexOf(json);
  expect(at).toBeGreaterThan(0);
  return at + json.length;
}

/** Where the system message's content ends in a raw body (just before its closing quote). */
function systemEndAt(r: RecordedRequest): number {
  const json = JSON.stringify(systemOf(r)).slice(0, -1);
  const at = r.raw.indexOf(json);
  expect(at).toBeGreaterThan(0);
  return at + json.length;
}

/**
 * A summarizer that copies every KEY-nnnn of the part it is asked to summarize (the messages after the system
 * message; in a merge the blocks too), so a gap or a double in what a block covers shows.
 */
function copyingSummarizer(padding = 0) {
  return (r: RecordedRequest): FakeReply => {
    if (kindOf(r) !== 'compaction') return defaultReply(r);
    const [first, ...rest] = r.body.messages;
    const merge = textOf(rest.at(-1)?.content).includes('Write one summary of the summary blocks');
    const part = `${merge ? textOf(first?.content) : ''}\n${rest.map((m) => textOf(m.content)).join('\n')}`;
    return { content: `## Exact identifiers\n- ${keysIn(part).join(', ') || 'none'}${padding ? `\n## Context\n- ${words(padding, 'pad')}` : ''}`, usage: null };
  };
}

/** The KEY-nnnn of the user messages between two message ids of the transcript (from inclusive, to exclusive). */
function keysBetween(messages: TranscriptMessage[], fromId: string | undefined, toId: string): string[] {
  const from = fromId ? messages.findIndex((m) => m.id === fromId) : 0;
  const to = messages.findIndex((m) => m.id === toId);
  expect(from).toBeGreaterThanOrEqual(0);
  expect(to).toBeGreaterThan(from);
  return keysIn(messages.slice(from, to).map((m) => m.content).join('\n'));
}

describe('compaction that keeps the prompt cache', () => {
  let h: Harness | undefined;
  afterEach(async () => { await h?.close(); h = undefined; });

  it('after 10 compactions: each request keeps the system prompt and every earlier block byte for byte, each block covers exactly the messages after the previous one', async () => {
    const lookup = defineTool({ name: 'lookup', group: 'test', description: 'looks things up', schema: z.object({ q: z.string() }), run: async () => 'found' });
    h = await startHarness({ config: small, tools: [lookup], reply: copyingSummarizer() });
    let sent = 0;
    while (compactions(h).length < 10 && sent < 200) {
      await h.send(`${key(sent)} ${words(100)}`);
      sent++;
    }
    const records = compactions(h);
    expect(records).toHaveLength(10);
    expect(records.slice(1).every((r) => r.appended)).toBe(true);

    // Each block holds exactly the keys of the messages from the previous compaction's first kept message up to its own.
    const messages = h.fileEntries().filter((e): e is TranscriptMessage => e.type === 'message');
    records.forEach((record, i) => {
      expect(keysIn(record.summary)).toEqual(keysBetween(messages, records[i - 1]?.firstKeptId, record.firstKeptId));
    });

    // Every turn request extends the previous one at least through its system message (all of it without a
    // compaction between them, the system prompt and the earlier blocks with one).
    const turns = h.turnRequests();
    for (let i = 1; i < turns.length; i++) {
      const [prev, next] = [turns[i - 1]!, turns[i]!];
      expect(systemOf(next).startsWith(systemOf(prev))).toBe(true);
      expect(commonPrefix(prev.raw, next.raw)).toBeGreaterThanOrEqual(systemEndAt(prev));
    }
    const last = turns.at(-1)!;
    expect(systemOf(last).split('\n\nSummary of ')).toHaveLength(11);

    // Every summary request repeats the previous turn request up to the messages it summarizes, tools included.
    const summaries = h.fake.requests.filter((r) => kindOf(r) === 'compaction');
    expect(summaries).toHaveLength(10);
    for (const s of summaries) {
      expect(isPrefixRequest(s)).toBe(true);
      const prev = h.fake.requests.slice(0, h.fake.requests.indexOf(s)).filter((r) => kindOf(r) === 'turn').at(-1)!;
      const n = s.body.messages.length - 1;
      const separate = textOf(s.body.messages[n]!.content).startsWith(SUMMARY_REQUEST_MARKER);
      const same = separate ? n : n - 1;
      expect(s.body.messages.slice(0, same)).toEqual(prev.body.messages.slice(0, same));
      expect(commonPrefix(prev.raw, s.raw)).toBeGreaterThanOrEqual(messagesEndAt(prev, same));
      expect(s.body.tools).toEqual(prev.body.tools);
      expect(s.body.tools).toHaveLength(prev.body.tools!.length);
    }

    // Nothing was lost or doubled: every key is in exactly one block or in the kept messages.
    const places = [...systemOf(last).split(/\n\nSummary of /).slice(1), last.body.messages.slice(1).map((m) => textOf(m.content)).join('\n')];
    for (let i = 0; i < sent; i++) expect(places.filter((p) => p.includes(key(i))), key(i)).toHaveLength(1);
  });

  it('merges the blocks into one when together they pass their share of the window, then appends again', async () => {
    h = await startHarness({ config: small, reply: copyingSummarizer(120) });
    let sent = 0;
    const merged = () => compactions(h!).findIndex((r, i) => i > 0 && !r.appended);
    while ((merged() < 0 || compactions(h).length < merged() + 2) && sent < 300) {
      await h.send(`${key(sent)} ${words(100)}`);
      sent++;
    }
    const records = compactions(h);
    const m = merged();
    expect(m).toBeGreaterThanOrEqual(2);
    expect(records.slice(1, m).every((r) => r.appended)).toBe(true);
    expect(records[m + 1]!.appended).toBe(true);
    // The merge summarized the blocks and its own part: every key before its first kept message.
    const messages = h.fileEntries().filter((e): e is TranscriptMessage => e.type === 'message');
    expect(keysIn(records[m]!.summary)).toEqual(keysBetween(messages, undefined, records[m]!.firstKeptId));
    const mergeRequest = h.fake.requests.filter((r) => kindOf(r) === 'compaction')[m]!;
    expect(textOf(mergeRequest.body.messages.at(-1)!.content)).toContain('Write one summary of the summary blocks');
    // The blocks took more than 20% of the 4000-token window before the merge, and less before the compaction that came first.
    const blocksTokens = (r: RecordedRequest) => countTokens(systemOf(r).slice(systemOf(r).indexOf('\n\nSummary of ')), 'gpt-test');
    expect(blocksTokens(mergeRequest)).toBeGreaterThan(800);
    expect(blocksTokens(h.fake.requests.filter((r) => kindOf(r) === 'compaction')[m - 1]!)).toBeLessThanOrEqual(800);
    const last = h.turnRequests().at(-1)!;
    expect(systemOf(last).split('\n\nSummary of ')).toHaveLength(3);
    for (let i = 0; i < sent; i++) expect(JSON.stringify(last.body.messages)).toContain(key(i));
  });

  it('a transcript written before blocks (one cumulative summary) loads as it did, and its summary stays byte for byte under the next block', async () => {
    h = await startHarness({ config: small, reply: copyingSummarizer() });
    await h.send(`${key(0)} hello`);
    const ids = (await h.history()).filter((e) => e.type === 'message').map((e) => e.id);
    await h.runtime.appendEntries(h.session(), [{ type: 'compaction', id: randomUUID(), summary: `## Exact identifiers\n- ${key(0)}`, firstKeptId: ids[1]!, tokensBefore: 50, tokensAfter: 20, at: '2026-03-02T10:00:00.000Z' }]);
    await h.send(`${key(1)} ${words(100)}`);
    const first = h.turnRequests().at(-1)!;
    expect(systemOf(first).endsWith(`\n\n${summaryMessage(`## Exact identifiers\n- ${key(0)}`)}`)).toBe(true);
    let sent = 2;
    while (compactions(h).length < 2 && sent < 60) await h.send(`${key(sent++)} ${words(100)}`);
    const [, record] = compactions(h);
    expect(record!.appended).toBe(true);
    const after = h.turnRequests().at(-1)!;
    expect(systemOf(after).startsWith(systemOf(first))).toBe(true);
    for (let i = 0; i < sent; i++) expect(JSON.stringify(after.body.messages)).toContain(key(i));
  });

  it('/compact <instructions> appends a block with the instructions in the summary request', async () => {
    h = await startHarness({ config: { agents: { defaults: { compaction: { keepRecentTokens: 100, memoryFlush: false }, contextPruning: { mode: 'off' } } } }, reply: copyingSummarizer() });
    for (let i = 0; i < 4; i++) await h.send(`${key(i)} ${words(60)}`);
    expect(await h.send('/compact')).toMatch(/^Compacted: /);
    for (let i = 4; i < 8; i++) await h.send(`${key(i)} ${words(60)}`);
    const before = h.turnRequests().at(-1)!;
    expect(await h.send('/compact keep the numbers')).toMatch(/^Compacted: /);
    const request = h.fake.requests.at(-1)!;
    expect(isPrefixRequest(request)).toBe(true);
    expect(textOf(request.body.messages.at(-1)!.content)).toContain('Additional instructions for this summary: keep the numbers');
    expect(commonPrefix(before.raw, request.raw)).toBeGreaterThan(systemEndAt(before));
    const [one, two] = compactions(h);
    expect(one!.appended).toBeUndefined();
    expect(two!.appended).toBe(true);
    const messages = h.fileEntries().filter((e): e is TranscriptMessage => e.type === 'message');
    expect(keysIn(two!.summary)).toEqual(keysBetween(messages, one!.firstKeptId, two!.firstKeptId));
    expect(keysIn(two!.summary).length).toBeGreaterThan(2);
  });

  it('an answer that only calls a tool fails the compaction cleanly; one with text and a tool call gives its text', async () => {
    let mode: 'tool-only' | 'both' = 'tool-only';
    h = await startHarness({
      config: small,
      reply: (r): FakeReply => {
        if (kindOf(r) !== 'compaction') return defaultReply(r);
        const toolCalls = [{ id: `call_${randomUUID()}`, name: 'memory_write', arguments: '{}' }];
        return mode === 'tool-only' ? { toolCalls, usage: null } : { content: '## Decisions\n- from the text', toolCalls, usage: null };
      },
    });
    await h.send('hello');
    await h.seed(20, (i) => `fact ${i}: ${words(100)}`);
    expect(await h.send('/compact')).toMatch(/^Compaction failed: The model called a tool \(memory_write\) instead of writing the summary\. The session is unchanged/);
    expect(compactions(h)).toHaveLength(0);
    expect(await h.send('still fine?')).toBe('ok');
    mode = 'both';
    expect(await h.send('/compact')).toMatch(/^Compacted: /);
    expect(compactions(h)[0]!.summary).toBe('## Decisions\n- from the text');
  });

  it('a summary request the provider finds too long falls back to the staged requests', async () => {
    h = await startHarness({
      config: small,
      reply: (r): FakeReply => (isPrefixRequest(r)
        ? { status: 400, error: { message: "This model's maximum context length is 3000 tokens.", code: 'context_length_exceeded' } }
        : copyingSummarizer()(r)),
    });
    await h.send(`${key(0)} hello`);
    await h.seed(12, (i) => `${key(i + 1)} ${words(100)}`);
    const start = h.fake.requests.length;
    expect(await h.send('/compact')).toMatch(/^Compacted: /);
    const [tried, ...staged] = h.fake.requests.slice(start);
    expect([kindOf(tried!), isPrefixRequest(tried!)]).toEqual(['compaction', true]);
    expect(staged.length).toBeGreaterThan(0);
    for (const r of staged) {
      expect([kindOf(r), isPrefixRequest(r)]).toEqual(['compaction', false]);
      expect(r.body.messages[0]!.content).toMatch(/^You compact a chat conversation/);
    }
    const [record] = compactions(h);
    expect(record!.appended).toBeUndefined();
    expect(keysIn(record!.summary).length).toBeGreaterThan(5);
  });
});
