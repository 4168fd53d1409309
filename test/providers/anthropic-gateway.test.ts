import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { SUMMARY_REQUEST_MARKER } from '../../src/agent/context/summary-request.ts';
import type { RunningGateway } from '../../src/main.ts';
import { breakpointsOf, lastUserText, startFakeAnthropic, type FakeAnthropic, type RecordedAnthropicRequest, type WireBlock } from '../fakes/fake-anthropic.ts';
import { startFakeOpenAI, textOf, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { TestChannel } from '../helpers/test-channel.ts';

// SPEC §18 through the gateway: Claude's prompt cache over a long conversation with compactions, and the same
// conversation accounted alike on both provider kinds.
describe('anthropic through the gateway', () => {
  let claude: FakeAnthropic;
  let openai: FakeOpenAI;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;
  let channel: TestChannel;

  beforeEach(async () => {
    [claude, openai] = await Promise.all([startFakeAnthropic(), startFakeOpenAI()]);
    tmp = tempDir();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await Promise.all([claude.close(), openai.close()]);
    tmp.remove();
  });

  const start = async (agentModel: string, window: number) => {
    channel = new TestChannel();
    gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel],
      config: {
        providers: {
          claude: { kind: 'anthropic', baseUrl: claude.baseURL, apiKey: 'sk-ant-test', model: 'claude-test-1', contextWindow: window, maxTokens: 512 },
          default: { baseUrl: openai.baseURL, apiKey: 'sk-open-test', model: 'gpt-test', contextWindow: window, maxTokens: 512 },
        },
        agents: { defaults: { model: agentModel, compaction: { reserveTokens: 1500, keepRecentTokens: 1200, memoryFlush: false }, contextPruning: { mode: 'off' } } },
        channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } },
      },
    });
    return gw;
  };
  const ask = async (text: string): Promise<string> => {
    const before = channel.sent.length;
    await channel.inject(text);
    await channel.waitForSent(before + 1);
    return channel.sent[before]!.message.text;
  };
  // A user message of about 150 tokens, different every turn, with an identifier to keep.
  const said = (i: number) => `Turn ${i}: please note ticket OPS-${1000 + i}. ${'The deploy of build 4182 failed on the staging cluster and we keep a log of it. '.repeat(8)}`;
  const isSummary = (r: RecordedAnthropicRequest) => lastUserText(r).includes(SUMMARY_REQUEST_MARKER);

  it('over 50 turns with compactions, turn and summary requests read most of their input from the cache, and every breakpoint rule holds', async () => {
    claude.fallback = (r) => (isSummary(r)
      ? { content: `## Decisions\n- none\n## Exact identifiers\n- ${[...new Set(JSON.stringify([r.body.system, r.body.messages]).match(/OPS-\d+/g) ?? [])].join(', ')}` }
      : { content: `Noted (${lastUserText(r).slice(0, 20)}).` });
    const g = await start('claude/claude-test-1', 6000);
    for (let i = 1; i <= 50; i++) expect(await ask(said(i))).toMatch(/^Noted \(/);
    const entry = await g.store.get('agent:main:main');
    expect(entry!.compactionCount).toBeGreaterThanOrEqual(3);
    const turns = claude.requests.filter((r) => !isSummary(r));
    for (const r of claude.requests) {
      const points = breakpointsOf(r);
      expect(points.length).toBeLessThanOrEqual(4);
      // The system prompt's own block is always a breakpoint (the cached prefix is tools + system).
      const system = r.body.system as { cache_control?: unknown }[];
      expect(system[0]!.cache_control).toEqual({ type: 'ephemeral' });
    }
    // Once compacted, the summary blocks follow the system prompt as blocks of their own, the last one a breakpoint.
    const last = turns.at(-1)!;
    const blocks = last.body.system as WireBlock[];
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    expect(blocks.at(-1)!.cache_control).toEqual({ type: 'ephemeral' });
    // What the ledger says is what the fake counted: the share of input read from the cache across turns 2..50.
    const sum = (list: RecordedAnthropicRequest[], pick: (c: NonNullable<RecordedAnthropicRequest['cache']>) => number) => list.reduce((n, r) => n + pick(r.cache!), 0);
    const later = turns.slice(1);
    const read = sum(later, (c) => c.read);
    const all = sum(later, (c) => c.read + c.write + c.input);
    // Measured 0.90: the breaks are the compactions (everything after the blocks is new once).
    expect(read / all).toBeGreaterThan(0.8);
    // The summary requests repeat the turn's prefix, so they are cache reads too (measured 0.88).
    const summaries = claude.requests.filter(isSummary);
    expect(summaries.length).toBe(entry!.compactionCount);
    expect(sum(summaries, (c) => c.read) / sum(summaries, (c) => c.read + c.write + c.input)).toBeGreaterThan(0.7);
    const ledger = g.accounting.providers.usage().find((u) => u.providerId === 'claude')!;
    expect(ledger.cacheReadTokens).toBe(sum(claude.requests, (c) => c.read));
    expect(ledger.cacheWriteTokens).toBe(sum(claude.requests, (c) => c.write));
    expect(ledger.inputTokens).toBe(sum(claude.requests, (c) => c.input));
    // The earliest identifier survived every compaction into the context of the last request.
    expect(JSON.stringify(last.body)).toContain('OPS-1001');
  }, 60_000);

  it('an overloaded OpenAI-compatible model falls back to Claude; Claude\'s "prompt is too long" compacts and answers', async () => {
    claude.fallback = (r) => (isSummary(r) ? { content: '## Decisions\n- none' } : { content: `Claude: ${lastUserText(r).slice(-12)}` });
    gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel = new TestChannel()],
      config: {
        providers: {
          claude: { kind: 'anthropic', baseUrl: claude.baseURL, apiKey: 'sk-ant-test', model: 'claude-test-1', maxTokens: 512 },
          default: { baseUrl: openai.baseURL, apiKey: 'sk-open-test', model: 'gpt-test', maxRetries: 2 },
        },
        agents: { defaults: { model: 'default/gpt-test', fallbacks: ['claude/claude-test-1'], compaction: { keepRecentTokens: 10 } } },
        channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } },
      },
    });
    openai.script.push({ status: 529, error: { message: 'Overloaded', type: 'overloaded_error' } });
    expect(await ask('first question')).toBe('Claude: rst question');
    expect(openai.requests).toHaveLength(1);
    expect(gw.accounting.providers.recent()[0]).toMatchObject({ providerId: 'claude', modelId: 'claude-test-1' });
    // The OpenAI key cools down, so Claude answers on; its context overflow is compacted, not failed over.
    expect(await ask('second question')).toBe('Claude: ond question');
    claude.script.push({ status: 400, error: { type: 'invalid_request_error', message: 'prompt is too long: 250000 tokens > 200000 maximum' } });
    expect(await ask('third question')).toBe('Claude: ird question');
    expect((await gw.store.get('agent:main:main'))!.compactionCount).toBe(1);
    expect(openai.requests).toHaveLength(1);
  });

  it('the same conversation costs the same prompt on both kinds, within the tokenizer\'s error', async () => {
    // The fake OpenAI counts the prompt as a provider would: every message's text, the tools' JSON, and an overhead per message.
    openai.fallback = (r) => {
      const prompt = r.body.messages.reduce((n, m) => n + countTokens(textOf(m.content)) + 4, 0) + countTokens(JSON.stringify(r.body.tools ?? []));
      return { content: `Noted (${textOf(r.body.messages.at(-1)!.content).slice(0, 20)}).`, usage: { prompt_tokens: prompt, completion_tokens: 6 } };
    };
    claude.fallback = (r) => ({ content: `Noted (${lastUserText(r).slice(0, 20)}).` });
    const prompts = async (model: string): Promise<number[]> => {
      const g = await start(model, 200_000);
      for (let i = 1; i <= 8; i++) await ask(said(i));
      const records = g.accounting.providers.recent().reverse();
      await g.stop();
      gw = undefined;
      tmp.remove();
      tmp = tempDir();
      return records.map((r) => r.inputTokens + r.cacheReadTokens + r.cacheWriteTokens);
    };
    const onOpenAI = await prompts('default/gpt-test');
    const onClaude = await prompts('claude/claude-test-1');
    expect(onClaude).toHaveLength(8);
    // Claude read most of it from its cache, yet the prompt each call cost is the same conversation's.
    expect(claude.stats.cacheReadTokens).toBeGreaterThan(claude.stats.inputTokens);
    for (const [i, tokens] of onClaude.entries()) expect(Math.abs(tokens - onOpenAI[i]!) / onOpenAI[i]!).toBeLessThan(0.1);
  }, 60_000);
});
