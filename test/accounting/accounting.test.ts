import path from 'node:path';
import { register as globalRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Accounting } from '../../src/accounting/accounting.ts';
import { GatewayMetrics } from '../../src/accounting/metrics.ts';
import { ProviderTracker } from '../../src/accounting/provider-tracker.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { parsePrometheus, sumOf } from '../http/prometheus.ts';
import { llmCall, record } from './records.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const sources = { activeSessions: () => 3, evictions: () => 7, queueDepth: () => 2, runningTurns: () => 1, messages: () => ({ accepted: 5, failed: 1 }) };

describe('provider tracker', () => {
  it('counts requests, retries, errors and tokens per provider and model', () => {
    const tracker = new ProviderTracker();
    tracker.record(llmCall({ retries: 2 }), record());
    tracker.record(llmCall({ modelId: 'gpt-other' }), record({ modelId: 'gpt-other', usage: { inputTokens: 1, outputTokens: 2, cacheReadTokens: 3, cacheWriteTokens: 4 } }));
    tracker.record(llmCall({ error: 'PROVIDER_RATE_LIMITED', retries: 1, usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } }), undefined);
    expect(tracker.usage()).toEqual([
      { providerId: 'default', modelId: 'gpt-other', requests: 1, retries: 0, errors: 0, inputTokens: 1, outputTokens: 2, cacheReadTokens: 3, cacheWriteTokens: 4 },
      { providerId: 'default', modelId: 'gpt-test', requests: 2, retries: 3, errors: 1, inputTokens: 100, outputTokens: 20, cacheReadTokens: 30, cacheWriteTokens: 5 },
    ]);
    expect(tracker.providerTotals('default')).toMatchObject({ requests: 3, errors: 1, retries: 3, lastError: { code: 'PROVIDER_RATE_LIMITED', modelId: 'gpt-test' } });
  });

  it('keeps the 256 most recent calls, newest first', () => {
    const tracker = new ProviderTracker();
    for (let i = 0; i < 300; i++) tracker.record(llmCall({ correlationId: `c${i}` }), record({ correlationId: `c${i}` }));
    const recent = tracker.recent();
    expect(recent).toHaveLength(256);
    expect(recent[0]?.correlationId).toBe('c299');
    expect(recent.at(-1)?.correlationId).toBe('c44');
    expect(tracker.recent(2).map((r) => r.correlationId)).toEqual(['c299', 'c298']);
  });
});

describe('metrics', () => {
  it('uses a registry per gateway, never the global default one', async () => {
    const before = await globalRegistry.metrics();
    const a = new GatewayMetrics(sources);
    const b = new GatewayMetrics(sources);
    a.llmCall(llmCall(), record());
    const textA = parsePrometheus(await a.text()).samples;
    const textB = parsePrometheus(await b.text()).samples;
    expect(sumOf(textA, 'switchboard_tokens_total')).toBe(155);
    expect(sumOf(textB, 'switchboard_tokens_total')).toBe(0);
    expect(await globalRegistry.metrics()).toBe(before);
  });

  it('exposes tokens by type, provider, model, kind and channel; calls, errors, retries, sessions, evictions, queue depth, latency', async () => {
    const m = new GatewayMetrics(sources);
    m.llmCall(llmCall({ retries: 1 }), record());
    m.llmCall(llmCall({ kind: 'compaction', channel: 'slack' }), record({ kind: 'compaction', channel: 'slack' }));
    m.llmCall(llmCall({ error: 'PROVIDER_FAILED' }), undefined);
    m.turnEnd({ correlationId: 'c', sessionKey: 'k', sessionId: 's', channel: 'telegram', agentId: 'main', outcome: 'replied', usage: llmCall().usage, durationMs: 1500, at: 0 });
    m.turnEnd({ correlationId: 'd', sessionKey: 'k', sessionId: 's', channel: 'telegram', agentId: 'main', outcome: 'failed', usage: llmCall().usage, durationMs: 10, at: 0 });
    const { samples, types } = parsePrometheus(await m.text());
    expect(sumOf(samples, 'switchboard_tokens_total', { type: 'input', kind: 'turn', channel: 'telegram', provider: 'default', model: 'gpt-test' })).toBe(100);
    expect(sumOf(samples, 'switchboard_tokens_total', { type: 'cache_read', kind: 'compaction', channel: 'slack' })).toBe(30);
    expect(sumOf(samples, 'switchboard_tokens_total')).toBe(310);
    expect(sumOf(samples, 'switchboard_llm_calls_total')).toBe(3);
    expect(sumOf(samples, 'switchboard_llm_errors_total', { code: 'PROVIDER_FAILED' })).toBe(1);
    expect(sumOf(samples, 'switchboard_llm_retries_total')).toBe(1);
    expect(sumOf(samples, 'switchboard_turns_total', { outcome: 'replied' })).toBe(1);
    expect(sumOf(samples, 'switchboard_turn_errors_total')).toBe(1);
    expect(sumOf(samples, 'switchboard_turn_duration_seconds_count')).toBe(2);
    expect(sumOf(samples, 'switchboard_turn_duration_seconds_bucket', { le: '2' })).toBe(2);
    expect(sumOf(samples, 'switchboard_turn_duration_seconds_bucket', { le: '1' })).toBe(1);
    expect(sumOf(samples, 'switchboard_active_sessions')).toBe(3);
    expect(sumOf(samples, 'switchboard_session_evictions_total')).toBe(7);
    expect(sumOf(samples, 'switchboard_queue_depth')).toBe(2);
    expect(sumOf(samples, 'switchboard_messages_total', { status: 'accepted' })).toBe(5);
    expect(types.get('switchboard_tokens_total')).toBe('counter');
    expect(types.get('switchboard_turn_duration_seconds')).toBe('histogram');
    // Only one metric family counts tokens, so summing "token" metrics never double counts.
    expect([...types.keys()].filter((name) => name.includes('token'))).toEqual(['switchboard_tokens_total']);
  });
});

describe('accounting observer', () => {
  const tmp = useTempDir();

  const open = async () => {
    const accounting = new Accounting({ stateDir: path.join(tmp.dir, 'data'), logger: silentLogger(), startedAt: Date.UTC(2025, 0, 1), metrics: sources });
    await accounting.open();
    return accounting;
  };

  it('feeds each LLM call to the ledger, totals, tracker and metrics; failed calls only count as errors', async () => {
    const accounting = await open();
    accounting.observer.onLlmCall?.(llmCall({ correlationId: 'x1', channel: 'api' }));
    accounting.observer.onLlmCall?.(llmCall({ correlationId: 'x2', channel: 'telegram', isEstimated: true }));
    accounting.observer.onLlmCall?.(llmCall({ correlationId: 'x3', error: 'PROVIDER_FAILED', usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } }));
    await accounting.flush();
    const ledger: string[] = [];
    await accounting.ledger.scan((r) => ledger.push(r.correlationId));
    expect(ledger).toEqual(['x1', 'x2']);
    const usage = accounting.totals.snapshot();
    expect(usage.totals).toEqual({ inputTokens: 200, outputTokens: 40, cacheReadTokens: 60, cacheWriteTokens: 10, totalTokens: 310, llmCalls: 2, estimatedCalls: 1 });
    expect(usage.channels.api?.totalTokens).toBe(155);
    expect(usage.channels.telegram?.estimatedCalls).toBe(1);
    expect(accounting.providers.usage()[0]).toMatchObject({ requests: 3, errors: 1 });
  });

  it('reads the ledger back at start: totals, recent calls and token counters survive a restart', async () => {
    const first = await open();
    for (let i = 0; i < 3; i++) first.observer.onLlmCall?.(llmCall({ correlationId: `r${i}` }));
    await first.flush();
    const second = await open();
    expect(second.totals.snapshot().totals.totalTokens).toBe(3 * (100 + 20 + 30 + 5)); // record(): input, output, cache read, cache write
    expect(second.totals.snapshot().since).toBe('2025-01-02T03:04:05.000Z');
    expect(second.providers.recent().map((r) => r.correlationId)).toEqual(['r2', 'r1', 'r0']);
    expect(sumOf(parsePrometheus(await second.metrics.text()).samples, 'switchboard_tokens_total')).toBe(3 * 155);
  });
});
