import { describe, expect, it } from 'vitest';
import { planCompaction } from '../../../src/agent/context/compaction.ts';
import { buildContext, type ContextInput } from '../../../src/agent/context/context.ts';
import { activeHistory, summaryMessage, laterSummaryMessage } from '../../../src/agent/context/summary-blocks.ts';
import { SUMMARY_REQUEST_MARKER, summaryRequest, summaryRequestText } from '../../../src/agent/context/summary-request.ts';
import type { MediaRecord } from '../../../src/core/message.ts';
import type { ChatImage } from '../../../src/providers/types.ts';
import type { SessionEntry } from '../../../src/sessions/entry.ts';
import type { TranscriptCompaction, TranscriptEntry, TranscriptMessage } from '../../../src/sessions/transcript.ts';
import { countRequestTokens } from '../../../src/tokens/tokens.ts';

const at = '2026-01-01T00:00:00.000Z';
const agent = { id: 'main', name: 'Switchboard', providerId: 'default', model: 'gpt-4o', fallbacks: [], workspace: '/w', tools: { preset: 'none', allow: [], deny: [] }, tokenBudget: 0, vision: 'auto' } as unknown as ContextInput['agent'];
const entry = () => ({ key: 'agent:main:main', channel: 'telegram', chatType: 'direct', overrides: {} } as unknown as SessionEntry);
const msg = (id: string, role: TranscriptMessage['role'] = 'user', content = `message ${id}`): TranscriptMessage => ({ type: 'message', id, role, content, at });
const compaction = (id: string, summary: string, firstKeptId: string, appended?: true): TranscriptCompaction => ({
  type: 'compaction', id, summary, firstKeptId, tokensBefore: 100, tokensAfter: 50, at, ...(appended ? { appended } : {}),
});
const input = (history: TranscriptEntry[], e = entry()): ContextInput => ({ agent, entry: e, history, model: 'gpt-4o', tools: [], now: 0 });

describe('summary blocks in the system message', () => {
  const u = ['u0', 'u1', 'u2', 'u3', 'u4', 'u5', 'u6'].map((id, i) => msg(id, i % 2 ? 'assistant' : 'user'));

  it('gathers the appended blocks back to the last entry that is not appended (an old cumulative summary)', () => {
    const history: TranscriptEntry[] = [
      u[0]!, u[1]!, compaction('c0', 'old cumulative', 'u1'), u[2]!, u[3]!,
      compaction('c1', 'first block', 'u3', true), u[4]!, compaction('c2', 'second block', 'u4', true), u[5]!, u[6]!,
    ];
    const active = activeHistory(history);
    expect(active.blocks).toEqual(['old cumulative', 'first block', 'second block']);
    expect(active.kept.map((m) => m.id)).toEqual(['u4', 'u5', 'u6']);
    // A merge (not appended) starts over.
    const merged = [...history, compaction('c3', 'merged', 'u6')];
    expect(activeHistory(merged).blocks).toEqual(['merged']);
    expect(activeHistory(merged).kept.map((m) => m.id)).toEqual(['u6']);
  });

  it('an old transcript (one cumulative summary) renders exactly as before blocks existed', () => {
    const history: TranscriptEntry[] = [u[0]!, u[1]!, compaction('c0', 'old cumulative', 'u1'), u[2]!];
    const built = buildContext(input(history));
    const system = buildContext(input([u[2]!])).messages[0]!.content;
    expect(built.messages[0]!.content).toBe(`${system}\n\n${summaryMessage('old cumulative')}`);
    expect(built.summary).toBe('old cumulative');
  });

  it('cacheBreaks end the system prompt and each block; an appended block leaves every earlier byte in place', () => {
    const e = entry();
    const base: TranscriptEntry[] = [u[0]!, u[1]!, u[2]!, u[3]!];
    const system = buildContext(input(base, e)).messages[0]!;
    expect(system.cacheBreaks).toEqual([system.content.length]);
    const one = [...base, compaction('c1', 'block one', 'u2')];
    const two = [...one, u[4]!, compaction('c2', 'block two', 'u4', true)];
    const three = [...two, u[5]!, compaction('c3', 'block three', 'u5', true)];
    const [s1, s2, s3] = [one, two, three].map((h) => buildContext(input(h, e)).messages[0]!);
    expect(s3!.cacheBreaks).toHaveLength(4);
    const [end0, end1, end2, end3] = s3!.cacheBreaks!;
    expect(s3!.content.slice(0, end0)).toBe(system.content);
    expect(s3!.content.slice(end0, end1)).toBe(`\n\n${summaryMessage('block one')}`);
    expect(s3!.content.slice(end1, end2)).toBe(`\n\n${laterSummaryMessage('block two')}`);
    expect(s3!.content.slice(end2, end3)).toBe(`\n\n${laterSummaryMessage('block three')}`);
    expect(end3).toBe(s3!.content.length);
    // Each request's system message is the previous one with a block added, breaks included.
    expect(s2!.content.startsWith(s1!.content)).toBe(true);
    expect(s3!.content.startsWith(s2!.content)).toBe(true);
    expect(s2!.cacheBreaks).toEqual(s1!.cacheBreaks!.concat(end2 as number));
    expect(s3!.cacheBreaks!.slice(0, 3)).toEqual(s2!.cacheBreaks);
  });
});

describe('the counts of a system message with blocks', () => {
  it('are kept per session while the blocks stay, made again when one is added, and always equal a fresh count', () => {
    const e = entry();
    const u = [msg('u0'), msg('a0', 'assistant'), msg('u1'), msg('a1', 'assistant'), msg('u2')];
    const one: TranscriptEntry[] = [...u.slice(0, 3), compaction('c1', `block one ${'x '.repeat(200)}`, 'u1')];
    const two: TranscriptEntry[] = [...one, u[3]!, u[4]!, compaction('c2', 'block two', 'u2', true)];
    for (const history of [one, one, two, two]) {
      const cached = buildContext(input(history, e));
      const fresh = buildContext(input(history));
      expect(cached.messages).toEqual(fresh.messages);
      expect([cached.tokens, cached.messageTokens, cached.components]).toEqual([fresh.tokens, fresh.messageTokens, fresh.components]);
      expect(cached.tokens).toBe(countRequestTokens(cached.messages, [], 'gpt-4o'));
    }
    expect(buildContext(input(two, e)).tokens).toBeGreaterThan(buildContext(input(one, e)).tokens);
  });
});

describe('the summary request', () => {
  const media: MediaRecord = { kind: 'image', mime: 'image/jpeg', size: 1000, sha256: 'x-orig', as: 'image', line: '[image: image/jpeg 800×600, 1 KB]', modelSha256: 'x', modelMime: 'image/jpeg', modelWidth: 512, modelHeight: 512 };
  const image: ChatImage = { url: 'data:image/jpeg;base64,AAAA', tokens: 255 };

  it('repeats the turn request up to the kept tail, then adds the instruction (joined to a trailing user message)', () => {
    const e = entry();
    const history: TranscriptEntry[] = [
      msg('u0'), msg('a0', 'assistant', 'x '.repeat(300)), compaction('c1', 'block one', 'u1'), msg('u1'), msg('a1', 'assistant', 'y '.repeat(300)),
      { ...msg('u2', 'user', 'look'), media: [media] }, msg('a2', 'assistant', 'z '.repeat(300)), msg('u3', 'user', 'and now?'),
    ];
    const turnInput = { ...input(history, e), imageOf: () => image };
    const turn = buildContext(turnInput);
    const plan = planCompaction(activeHistory(history).kept, 50, 'gpt-4o')!;
    expect(plan.summarize.map((m) => m.id)).toEqual(['u1', 'a1', 'u2', 'a2']);
    const request = summaryRequest({ input: turnInput, tools: [], model: 'gpt-4o', factor: 1, threshold: 10_000 }, plan, { mode: 'append', blocks: 1 });
    // System (with the block), u1, a1, u2 (its image too), a2: as the turn request had them, then the instruction.
    expect(request.messages.slice(0, 5)).toEqual(turn.messages.slice(0, 5));
    expect(request.messages[3]!.images).toEqual([image]);
    expect(request.messages).toHaveLength(6);
    const instruction = request.messages[5]!;
    expect(instruction.role).toBe('user');
    expect(instruction.content.startsWith(SUMMARY_REQUEST_MARKER)).toBe(true);
    expect(instruction.content).toContain('Summarize the conversation after the summary blocks above');
    // The summarized image becomes its line after the compaction: the instruction names it.
    expect(instruction.content).toContain(`each replaced by its line: ${media.line}`);

    // A part that ends with a user message: the instruction joins it (never two user messages in a row).
    const kept = activeHistory(history).kept;
    const shorter = { summarize: kept.slice(0, 1), keep: kept.slice(1), firstKeptId: 'a1', keptTokens: 0 };
    const joined = summaryRequest({ input: turnInput, tools: [], model: 'gpt-4o', factor: 1, threshold: 10_000 }, shorter, { mode: 'append', blocks: 1 });
    expect(joined.messages).toHaveLength(2);
    expect(joined.messages[1]!.content).toBe(`${turn.messages[1]!.content}\n\n${joined.messages[1]!.content.split('\n\n').slice(1).join('\n\n')}`);
    expect(joined.messages[1]!.content).toContain(SUMMARY_REQUEST_MARKER);
  });

  it('says what to summarize in each mode, and carries /compact instructions', () => {
    expect(summaryRequestText({ mode: 'append', blocks: 0 })).toContain('Summarize the conversation above');
    expect(summaryRequestText({ mode: 'append', blocks: 2 })).toContain('one more block after the others');
    const merge = summaryRequestText({ mode: 'merge', blocks: 3, instructions: ' keep the numbers ' });
    expect(merge).toContain('Write one summary of the summary blocks');
    expect(merge).toContain('Additional instructions for this summary: keep the numbers');
    for (const text of [merge, summaryRequestText({ mode: 'append', blocks: 1 })]) {
      expect(text).toContain('## Decisions\n## Open tasks\n## Constraints and preferences\n## Pending asks\n## Exact identifiers\n## Context');
      expect(text).toContain('copy every identifier exactly as written');
      expect(text).toContain('Do not call any tool');
    }
  });
});
