import { afterEach, describe, expect, it } from 'vitest';
import type { LedgerRecord } from '../../src/accounting/ledger-record.ts';
import { startApiHarness, total, type ApiHarness } from './api-harness.ts';
import { parsePrometheus, sumOf } from './prometheus.ts';

const KEY = 'agent:main:api:direct:carol';
const enc = encodeURIComponent;

describe('status, usage, metrics, providers and timeline routes', () => {
  let h: ApiHarness;
  afterEach(async () => { await h?.close(); });

  const get = async <T = Record<string, unknown>>(path: string): Promise<T> => {
    const response = await fetch(`${h.gw.url}${path}`);
    expect(response.status, path).toBe(200);
    return (await response.json()) as T;
  };
  const chat = (text: string, requestId?: string, user = 'carol') => h.client.chat.completions.create(
    { model: 'main', user, messages: [{ role: 'user', content: text }] },
    requestId ? { headers: { 'X-Request-Id': requestId } } : {},
  );

  it('GET /status reports version, uptime, channels, sessions and providers', async () => {
    h = await startApiHarness();
    await chat('hi');
    const status = await get('/status');
    expect(status).toMatchObject({
      version: '0.1.0',
      sessions: { active: 1, persisted: 1 },
      queue: { running: 0, queued: 0 },
    });
    expect(typeof status.uptimeSeconds).toBe('number');
    expect(status.channels).toEqual(expect.arrayContaining([
      { id: 'webchat', accountId: 'default', status: 'running', supervision: expect.objectContaining({ state: 'connected', attempts: 1 }) },
      { id: 'api', accountId: 'default', status: 'running' },
    ]));
    expect(status.providers).toEqual([{ id: 'default', kind: 'openai', model: 'gpt-test', contextWindow: 128000, requests: 1, retries: 0, errors: 0, totalTokens: 15 }]);
  });

  it('GET /usage, /metrics/providers and /metrics agree with the ledger', async () => {
    h = await startApiHarness({ fallback: () => ({ content: 'ok', usage: { prompt_tokens: 50, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 20 } } }) });
    await chat('one');
    await chat('two', undefined, 'dave');
    await fetch(`${h.gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'w', text: 'from the web' }) });
    h.fake.script.push({ status: 500 });
    await chat('fails').catch(() => undefined);
    const ledger = h.ledger();
    expect(ledger).toHaveLength(3);
    const sum = ledger.reduce((n, r) => n + total(r), 0);

    const usage = await get<{ totals: Record<string, number>; channels: Record<string, Record<string, number>> }>('/usage');
    expect(usage.totals).toEqual({ inputTokens: 90, outputTokens: 21, cacheReadTokens: 60, cacheWriteTokens: 0, totalTokens: sum, llmCalls: 3, estimatedCalls: 0 });
    expect(usage.channels.api?.totalTokens).toBe(2 * 57);
    expect(usage.channels.webchat?.totalTokens).toBe(57);

    expect(await get('/metrics/providers')).toEqual([
      { providerId: 'default', modelId: 'gpt-test', requests: 4, retries: 0, errors: 1, inputTokens: 90, outputTokens: 21, cacheReadTokens: 60, cacheWriteTokens: 0 },
    ]);

    const response = await fetch(`${h.gw.url}/metrics`);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const { samples } = parsePrometheus(await response.text());
    expect(sumOf(samples, 'switchboard_tokens_total')).toBe(sum);
    expect(sumOf(samples, 'switchboard_tokens_total', { type: 'cache_read' })).toBe(60);
    expect(sumOf(samples, 'switchboard_tokens_total', { channel: 'webchat' })).toBe(57);
    expect(sumOf(samples, 'switchboard_llm_errors_total')).toBe(1);
    expect(sumOf(samples, 'switchboard_turns_total', { outcome: 'replied' })).toBe(3);
    expect(sumOf(samples, 'switchboard_turns_total', { outcome: 'failed' })).toBe(1);
    expect(sumOf(samples, 'switchboard_turn_duration_seconds_count')).toBe(4);
    expect(sumOf(samples, 'switchboard_active_sessions')).toBe(3);
    expect(samples.some((s) => s.name === 'switchboard_queue_depth')).toBe(true);
    expect(samples.some((s) => s.name === 'switchboard_session_evictions_total')).toBe(true);
  });

  it('GET /admin/providers lists recent calls newest first; the timeline shows a session\'s calls with their correlation ids', async () => {
    h = await startApiHarness();
    await chat('first', 'corr-1');
    await chat('other', 'corr-x', 'erin');
    await chat('second', 'corr-2');
    const providers = await get<{ usage: unknown[]; recentTurns: LedgerRecord[] }>('/admin/providers');
    expect(providers.usage).toHaveLength(1);
    expect(providers.recentTurns.map((r) => r.correlationId)).toEqual(['corr-2', 'corr-x', 'corr-1']);

    const timeline = await get<{ sessionKey: string; sessionId: string; turns: LedgerRecord[] }>(`/admin/sessions/${enc(KEY)}/timeline?limit=100`);
    const entry = await get<{ sessionId: string }>(`/admin/sessions/${enc(KEY)}`);
    expect(timeline.sessionKey).toBe(KEY);
    expect(timeline.sessionId).toBe(entry.sessionId);
    expect(timeline.turns.map((t) => t.correlationId)).toEqual(['corr-1', 'corr-2']);
    expect(timeline.turns[0]).toMatchObject({ sessionKey: KEY, sessionId: entry.sessionId, channel: 'api', kind: 'turn', providerId: 'default', modelId: 'gpt-test', inputTokens: 10, outputTokens: 5 });
    const limited = await get<{ turns: LedgerRecord[] }>(`/admin/sessions/${enc(KEY)}/timeline?limit=1`);
    expect(limited.turns.map((t) => t.correlationId)).toEqual(['corr-2']);

    expect((await fetch(`${h.gw.url}/admin/sessions/${enc('agent:main:api:direct:nobody')}/timeline`)).status).toBe(404);
    const bad = await fetch(`${h.gw.url}/admin/sessions/not-a-key/timeline`);
    expect(bad.status).toBe(400);
    expect((await fetch(`${h.gw.url}/admin/sessions/${enc(KEY)}/timeline?limit=0`)).status).toBe(400);
  });

  it('keeps ledger, recent calls, timeline, usage and token counters across a restart', async () => {
    h = await startApiHarness();
    await chat('before restart', 'before-1');
    await h.restart();
    const ledger = h.ledger();
    expect(ledger.map((r) => r.correlationId)).toEqual(['before-1']);
    expect((await get<{ recentTurns: LedgerRecord[] }>('/admin/providers')).recentTurns.map((r) => r.correlationId)).toEqual(['before-1']);
    expect((await get<{ turns: LedgerRecord[] }>(`/admin/sessions/${enc(KEY)}/timeline`)).turns.map((r) => r.correlationId)).toEqual(['before-1']);
    await chat('after restart', 'after-1');
    const timeline = await get<{ turns: LedgerRecord[] }>(`/admin/sessions/${enc(KEY)}/timeline`);
    expect(timeline.turns.map((r) => r.correlationId)).toEqual(['before-1', 'after-1']);
    const sum = h.ledger().reduce((n, r) => n + total(r), 0);
    expect((await get<{ totals: { totalTokens: number } }>('/usage')).totals.totalTokens).toBe(sum);
    expect(sumOf(parsePrometheus(await (await fetch(`${h.gw.url}/metrics`)).text()).samples, 'switchboard_tokens_total')).toBe(sum);
    // The session's totals on the entry survive too.
    expect(await get(`/admin/sessions/${enc(KEY)}`)).toMatchObject({ tokens: { input: 20, output: 10 } });
  });

  it('the /usage and /status chat commands show the same numbers as the routes', async () => {
    h = await startApiHarness({ fallback: () => ({ content: 'ok', usage: { prompt_tokens: 1234, completion_tokens: 56 } }) });
    await chat('spend some tokens');
    await chat('and more', undefined, 'frank');
    const n = (v: number) => v.toLocaleString('en-US');

    const usageReply = (await chat('/usage')).choices[0]?.message.content ?? '';
    const entry = await get<{ tokens: { input: number; output: number; cacheRead: number; cacheWrite: number }; totalTokens: number }>(`/admin/sessions/${enc(KEY)}`);
    const usage = await get<{ totals: { totalTokens: number; llmCalls: number }; channels: Record<string, { totalTokens: number }> }>('/usage');
    // The entry's totals are the key's across resets; with one session they are also this session's.
    const figures = `input ${n(entry.tokens.input)} · output ${n(entry.tokens.output)} · cache read ${n(entry.tokens.cacheRead)} · cache write ${n(entry.tokens.cacheWrite)} · total ${n(entry.totalTokens)}`;
    expect(usageReply).toContain(`across resets (1 session, 1 LLM call): ${figures}`);
    expect(usageReply).toMatch(new RegExp(`this session \\(since .*, 1 LLM call\\): ${figures}`));
    expect(usageReply).toContain(`gateway: ${n(usage.totals.totalTokens)} tokens in ${usage.totals.llmCalls} LLM calls`);
    expect(usageReply).toContain(`api: ${n(usage.channels.api!.totalTokens)} tokens`);

    const statusReply = (await chat('/status')).choices[0]?.message.content ?? '';
    const status = await get<{ version: string; sessions: { active: number; persisted: number }; providers: { requests: number; errors: number; totalTokens: number }[] }>('/status');
    expect(statusReply).toContain(KEY);
    expect(statusReply).toContain(`gateway: v${status.version}`);
    expect(statusReply).toContain(`sessions ${status.sessions.active} active / ${status.sessions.persisted} stored`);
    expect(statusReply).toContain(`provider default (gpt-test): ${status.providers[0]!.requests} requests · 0 retries · ${status.providers[0]!.errors} errors · ${n(status.providers[0]!.totalTokens)} tokens`);
    expect(statusReply).toContain(`total ${n(entry.totalTokens)}`);
  });
});
