import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { userText, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { sentTo } from '../channels/telegram/harness.ts';
import { dm } from '../channels/telegram/updates.ts';
import { testConfig } from '../helpers/gateway.ts';
import { gatewayHttp } from '../helpers/gateway-http.ts';
import { until } from '../helpers/wait.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

const lastUser = (r: RecordedRequest) => userText([...r.body.messages].reverse().find((m) => m.role === 'user')?.content);
const rounds = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
const search = (n: number): FakeReply => ({ toolCalls: [{ id: `t${n}`, name: 'memory_search', arguments: '{"query":"x"}' }], usage: { prompt_tokens: 30, completion_tokens: 10 } });


describe('budgets and rate limits', () => {
  const fake = useFakeOpenAI();
  let telegram: FakeTelegram | undefined;
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  let clock: ManualClock;

  beforeEach(async () => {
    clock = new ManualClock('2026-06-01T10:00:00Z');
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await telegram?.close();
    telegram = undefined;
  });

  const start = async (config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0, maxTokens: 20 } },
        ...config, session: { dmScope: 'per-peer', reset: { mode: 'off' }, ...(config.session ?? {}) },
      }, env),
      logger: silentLogger(), clock,
    });
    return gw;
  };
  const http = gatewayHttp(() => gw!.url!);
  const { webchat, entry, metric } = http;
  const reply = (user: string, text: string) => http.say(user, text);

  it('budget 300 with fixed usage: the first message is sent with its answer capped to what is left; the turn that would pass is refused before the provider sees it; /new starts fresh', async () => {
    fake.fallback = () => ({ content: 'fine', usage: { prompt_tokens: 150, completion_tokens: 10 } });
    // The provider's own maxTokens (4096) is far above the budget: the first message must still be sent.
    await start({ providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } }, session: { tokenBudget: 300 }, agents: { defaults: { tools: { preset: 'none' } } } });
    expect(await reply('alice', 'one')).toBe('fine');
    expect(fake.requests).toHaveLength(1);
    // The first call's prompt is our count of it (no reported usage yet), as its ledger record shows: the cap is
    // what the 300-token budget leaves after it.
    await gw!.accounting.flush();
    const timeline = (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent('agent:main:direct:alice')}/timeline`)).json()) as {
      turns: { estimatedInputTokensByComponent: Record<string, number> }[];
    };
    const prompt = Object.values(timeline.turns[0]!.estimatedInputTokensByComponent).reduce((a, b) => a + b, 0);
    expect(fake.requests[0]!.body.max_completion_tokens).toBe(300 - prompt);
    const refused = await reply('alice', 'two');
    expect(refused).toMatch(/^This conversation has used 160 of its 300-token budget, and the next request alone needs about \d+ more, so I did not send it\. Start a new session with \/new, or ask the owner to raise the budget \(session\.tokenBudget\)\.$/);
    expect(fake.requests).toHaveLength(1);
    const key = 'agent:main:direct:alice';
    expect(await entry(key)).toMatchObject({ runState: 'budget-limited', tokenBudget: { used: 160, budget: 300 } });
    expect(await reply('alice', '/status')).toContain('• budget: 160 / 300 tokens this session');
    expect(await metric('switchboard_refusals_total{reason="session_budget"}')).toBe(1);
    await gw!.accounting.flush();
    const ledger = (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(key)}/timeline`)).json()) as { turns: unknown[] };
    expect(ledger.turns).toHaveLength(1);
    await reply('alice', '/new');
    expect(await reply('alice', 'three')).toBe('fine');
    expect(fake.requests).toHaveLength(2);
    expect((await entry(key)).tokenBudget).toEqual({ used: 160, budget: 300 });
  });

  it('an agent\'s own tokenBudget overrides session.tokenBudget: the refusal names it, /status and the admin routes show it', async () => {
    fake.fallback = () => ({ content: 'fine', usage: { prompt_tokens: 150, completion_tokens: 10 } });
    await start({ session: { tokenBudget: 100_000 }, agents: { defaults: { tools: { preset: 'none' } }, list: [{ id: 'main', tokenBudget: 300 }] } });
    expect(await reply('alice', 'one')).toBe('fine');
    expect(await reply('alice', 'two')).toMatch(/^This conversation has used 160 of its 300-token budget, .* ask the owner to raise the budget \(agents\.list\[main\]\.tokenBudget\)\.$/);
    expect(fake.requests).toHaveLength(1);
    const key = 'agent:main:direct:alice';
    expect((await entry(key)).tokenBudget).toEqual({ used: 160, budget: 300 });
    expect(await reply('alice', '/status')).toContain('• budget: 160 / 300 tokens this session\n');
    const list = (await (await fetch(`${gw!.url}/admin/sessions`)).json()) as { sessions: { key: string; tokenBudget?: unknown }[] };
    expect(list.sessions.find((e) => e.key === key)?.tokenBudget).toEqual({ used: 160, budget: 300 });
    const active = (await (await fetch(`${gw!.url}/admin/sessions?active=1`)).json()) as { sessions: { key: string; tokenBudget?: unknown }[] };
    expect(active.sessions.find((e) => e.key === key)?.tokenBudget).toEqual({ used: 160, budget: 300 });
    const reset = await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(key)}/reset`, { method: 'POST' });
    expect(((await reset.json()) as { tokenBudget?: unknown }).tokenBudget).toEqual({ used: 0, budget: 300 });
  });

  it('over budget, an admin or chat compaction answers with the budget line (409 session_budget), its refused memory flush counted once', async () => {
    fake.fallback = () => ({ content: 'fine', usage: { prompt_tokens: 300, completion_tokens: 100 } });
    await start({ session: { tokenBudget: 1000 }, agents: { defaults: { tools: { preset: 'none' }, compaction: { keepRecentTokens: 1 } } } });
    expect(await reply('alice', 'one')).toBe('fine');
    expect(await reply('alice', 'two')).toBe('fine');
    expect(fake.requests).toHaveLength(2);
    const key = 'agent:main:direct:alice';
    const compact = await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(key)}/compact`, { method: 'POST' });
    expect(compact.status).toBe(409);
    const body = (await compact.json()) as { error: { message: string; type: string; code: string } };
    expect(body.error.code).toBe('session_budget');
    expect(body.error.type).toBe('conflict_error');
    expect(body.error.message).toMatch(/^This conversation has used 800 of its 1,000-token budget, .* Start a new session with \/new, or ask the owner to raise the budget \(session\.tokenBudget\)\.$/);
    expect(fake.requests).toHaveLength(2);
    expect(await metric('switchboard_refusals_total{reason="session_budget"}')).toBe(1);
    expect(await reply('alice', '/compact')).toContain('This conversation has used 800 of its 1,000-token budget');
    expect(fake.requests).toHaveLength(2);
    expect(await metric('switchboard_refusals_total{reason="session_budget"}')).toBe(2);
    expect((await entry(key)).compactionCount).toBe(0);
  });

  it('a threshold compaction refused by the budget refuses the turn with the budget line, counted once, nothing sent', async () => {
    fake.fallback = () => ({ content: 'fine', usage: { prompt_tokens: 150, completion_tokens: 10 } });
    // A 200-token window: every turn is over the compaction threshold, so turn two compacts first.
    await start({
      providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0, contextWindow: 200 } },
      session: { tokenBudget: 300 }, agents: { defaults: { tools: { preset: 'none' }, compaction: { keepRecentTokens: 1 } } },
    });
    expect(await reply('alice', 'one')).toBe('fine');
    expect(await reply('alice', 'two')).toMatch(/^This conversation has used 160 of its 300-token budget, .*\(session\.tokenBudget\)\.$/);
    expect(fake.requests).toHaveLength(1);
    expect(await metric('switchboard_refusals_total{reason="session_budget"}')).toBe(1);
    expect(await entry('agent:main:direct:alice')).toMatchObject({ runState: 'budget-limited', compactionCount: 0 });
  });

  it('3 per minute, burst 3: the web chat and the OpenAI API answer 429 with Retry-After; the bucket refills with the clock', async () => {
    fake.fallback = () => ({ content: 'ok', usage: null });
    await start({ limits: { perSender: { perMinute: 3, burst: 3 } }, agents: { defaults: { tools: { preset: 'none' } } } });
    for (let i = 0; i < 3; i++) expect((await webchat('bob', `hi ${i}`)).status).toBe(200);
    const limited = await webchat('bob', 'too many');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('20');
    expect(await limited.json()).toEqual({ error: { message: 'Too many messages from you; try again in 20 s.', type: 'rate_limit_error', code: 'rate_limit_exceeded' } });
    expect((await webchat('carol', 'someone else')).status).toBe(200);
    expect(await reply('bob', '/status')).toContain('**Status**');
    clock.advance(20_000);
    expect((await webchat('bob', 'refilled one')).status).toBe(200);
    expect((await webchat('bob', 'and one too many')).status).toBe(429);

    const api = (n: number) => fetch(`${gw!.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'main', user: 'dave', messages: [{ role: 'user', content: `q${n}` }] }) });
    for (let i = 0; i < 3; i++) expect((await api(i)).status).toBe(200);
    const refused = await api(4);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('20');
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
    expect(await metric('switchboard_refusals_total{reason="rate_limit"}')).toBe(3);
  });

  it('on Telegram a sender over the limit gets one slow-down line; later messages in the window are not answered, /status is', async () => {
    telegram = await startFakeTelegram();
    fake.fallback = (r) => ({ content: `re: ${lastUser(r)}`, usage: null });
    await start({ limits: { perSender: { perMinute: 3, burst: 3 } }, channels: { telegram: { dmPolicy: 'open' } }, agents: { defaults: { tools: { preset: 'none' } } } },
      { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    for (const text of ['m1', 'm2', 'm3', 'm4', 'm5']) telegram.pushUpdate(dm(text));
    telegram.pushUpdate(dm('/status'));
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('Status'));
    await until(() => sentTo(telegram!, 42).length >= 5 || undefined, 'the answers');
    const texts = sentTo(telegram, 42).map((c) => String(c.body.text));
    expect(texts.filter((t) => t.startsWith('re: '))).toEqual(['re: m1', 're: m2', 're: m3']);
    expect(texts.filter((t) => t.startsWith('Slow down'))).toEqual(['Slow down, please: I take at most 3 messages a minute from each person. Messages sent in the next 20 s are not answered.']);
    expect(fake.requests.map(lastUser)).toEqual(['m1', 'm2', 'm3']);
  });

  it('a goal run stops at its tool-call budget, counted across a restart in the middle', async () => {
    let hold: Promise<void> | undefined;
    let release!: () => void;
    fake.fallback = async (r) => {
      if (hold && lastUser(r).startsWith('[background_auto_continue]')) await hold;
      return search(rounds(r));
    };
    const config = { agents: { defaults: { maxIterationsPerBatch: 2 } }, backgroundExecution: { enabled: true, maxToolCalls: 5 }, gateway: { shutdownGraceMs: 0 } };
    await start(config);
    await reply('alice', '/goal search forever');
    hold = new Promise<void>((resolve) => { release = resolve; });
    await reply('alice', 'go');
    await until(() => fake.requests.some((r) => lastUser(r).startsWith('[background_auto_continue]')) || undefined, 'the background batch to start');
    await gw!.stop();
    const key = 'agent:main:direct:alice';
    release();
    hold = undefined;
    await start(config);
    const stopped = await until(async () => { const e = await entry(key); return e.runState === 'budget-limited' ? e : undefined; }, 'the budget to stop the run');
    expect(stopped.checkpoint).toMatchObject({ toolCalls: 5 });
    // The resumed run counted on from the calls made before the restart: five results in all, never a sixth.
    const history = (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(key)}/history`)).json()) as { entries: { role?: string }[] };
    expect(history.entries.filter((e) => e.role === 'tool')).toHaveLength(5);
    expect(await metric('switchboard_refusals_total{reason="run_budget"}')).toBe(1);
  });

  it('a goal run stops at its token budget and at its wall-clock budget, saying which', async () => {
    fake.fallback = (r) => search(rounds(r));
    await start({ agents: { defaults: { maxIterationsPerBatch: 2 } }, backgroundExecution: { enabled: true, tokenBudget: 100, maxWallClockMinutes: 0 } });
    await reply('alice', '/goal spend tokens');
    await reply('alice', 'go');
    const tokens = await until(async () => { const e = await entry('agent:main:direct:alice'); return e.runState === 'budget-limited' ? e : undefined; }, 'the token budget');
    expect(tokens.checkpoint).toMatchObject({ tokens: 120, toolCalls: 3 });
    await gw!.stop();

    let gate!: () => void;
    let held = new Promise<void>((resolve) => { gate = resolve; });
    fake.fallback = async (r) => {
      if (lastUser(r).startsWith('[background_auto_continue]')) await held;
      return search(rounds(r));
    };
    await start({ agents: { defaults: { maxIterationsPerBatch: 1 } }, backgroundExecution: { enabled: true, tokenBudget: 0, maxWallClockMinutes: 30 } });
    await reply('bob', '/goal take time');
    await reply('bob', 'go');
    await until(() => gw!.gateway.background.running === 1 || undefined, 'the background batch');
    clock.advance(31 * 60_000);
    gate();
    held = Promise.resolve();
    const timed = await until(async () => { const e = await entry('agent:main:direct:bob'); return e.runState === 'budget-limited' ? e : undefined; }, 'the time budget');
    expect(timed.checkpoint?.batch).toBe(3);
  });

  describe('on Telegram, across a restart', () => {
    const tg = async (config: Record<string, unknown>) => {
      telegram ??= await startFakeTelegram();
      return start({ channels: { telegram: { dmPolicy: 'open' } }, ...config }, { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    };
    const texts = () => sentTo(telegram!, 42).map((c) => String(c.body.text));
    /** Sets a goal and starts it; resolves once the first background batch's LLM call is held. */
    const holdFirstBackgroundBatch = async () => {
      let release!: () => void;
      const held = new Promise<void>((resolve) => { release = resolve; });
      fake.fallback = async (r) => {
        if (lastUser(r).startsWith('[background_auto_continue]')) await held;
        return search(rounds(r));
      };
      telegram!.pushUpdate(dm('/goal search the notes'));
      await telegram!.waitFor('sendMessage', (c) => String(c.body.text).includes('Goal set'));
      telegram!.pushUpdate(dm('go'));
      await until(() => fake.requests.some((r) => lastUser(r).startsWith('[background_auto_continue]')) || undefined, 'the background batch to start');
      return release;
    };

    it('a goal run stops at its token budget, counted across a restart in the middle, and says so in the chat', async () => {
      const config = { agents: { defaults: { maxIterationsPerBatch: 2 } }, backgroundExecution: { enabled: true, tokenBudget: 200 }, gateway: { shutdownGraceMs: 0 } };
      await tg(config);
      const release = await holdFirstBackgroundBatch();
      await gw!.stop();
      gw = undefined;
      release();
      const before = fake.requests.length;
      fake.fallback = (r) => search(rounds(r));
      await tg(config);
      const line = await telegram!.waitFor('sendMessage', (c) => String(c.body.text).includes('budget'));
      expect(String(line.body.text)).toBe('I stopped working on the goal: it reached its token budget (200 of 200 tokens, backgroundExecution.tokenBudget). Say "continue" to go on with a fresh budget, or /goal off to drop the goal.');
      expect(texts().filter((t) => t.includes('reached its'))).toHaveLength(1);
      // 80 tokens before the stop (two calls of 40); the resumed run needed only the rest, not a fresh 200.
      expect(fake.requests.length - before).toBe(3);
      const stopped = await entry('agent:main:direct:42');
      expect(stopped.runState).toBe('budget-limited');
      expect(stopped.checkpoint).toMatchObject({ tokens: 200, toolCalls: 5 });
    });

    it('a goal run stops at its wall-clock budget when the clock passed it during a stop, and says so in the chat', async () => {
      const config = { agents: { defaults: { maxIterationsPerBatch: 2 } }, backgroundExecution: { enabled: true, tokenBudget: 0, maxWallClockMinutes: 30 }, gateway: { shutdownGraceMs: 0 } };
      await tg(config);
      const release = await holdFirstBackgroundBatch();
      await gw!.stop();
      gw = undefined;
      release();
      clock.advance(31 * 60_000);
      const before = fake.requests.length;
      fake.fallback = (r) => search(rounds(r));
      await tg(config);
      const line = await telegram!.waitFor('sendMessage', (c) => String(c.body.text).includes('budget'));
      expect(String(line.body.text)).toBe('I stopped working on the goal: it reached its time budget (31 of 30 minutes, backgroundExecution.maxWallClockMinutes). Say "continue" to go on with a fresh budget, or /goal off to drop the goal.');
      expect(fake.requests.length - before).toBe(0);
      expect((await entry('agent:main:direct:42')).runState).toBe('budget-limited');
    });

    it('a redelivered update refused by the rate limit is not answered after a restart; the bucket refills with the clock', async () => {
      fake.fallback = (r) => ({ content: `re: ${lastUser(r)}`, usage: null });
      const config = { limits: { perSender: { perMinute: 1, burst: 1 } }, agents: { defaults: { tools: { preset: 'none' } } } };
      await tg(config);
      telegram!.pushUpdate({ update_id: 500, ...dm('m1') });
      await telegram!.waitFor('sendMessage', (c) => String(c.body.text) === 're: m1');
      const refused = { update_id: 501, ...dm('m2') };
      telegram!.pushUpdate(refused);
      await telegram!.waitFor('sendMessage', (c) => String(c.body.text).startsWith('Slow down'));
      await gw!.stop();
      gw = undefined;
      clock.advance(60_000);
      await tg(config);
      telegram!.redeliver(refused);
      telegram!.pushUpdate({ update_id: 502, ...dm('m3') });
      await telegram!.waitFor('sendMessage', (c) => String(c.body.text) === 're: m3');
      expect(texts()).toEqual(['re: m1', 'Slow down, please: I take at most 1 message a minute from each person. Messages sent in the next 60 s are not answered.', 're: m3']);
      expect(fake.requests.map(lastUser)).toEqual(['m1', 'm3']);
    });

    it('the Telegram bucket refills with the injected clock', async () => {
      fake.fallback = (r) => ({ content: `re: ${lastUser(r)}`, usage: null });
      await tg({ limits: { perSender: { perMinute: 2, burst: 1 } }, agents: { defaults: { tools: { preset: 'none' } } } });
      telegram!.pushUpdate(dm('a1'));
      await telegram!.waitFor('sendMessage', (c) => String(c.body.text) === 're: a1');
      telegram!.pushUpdate(dm('a2'));
      await telegram!.waitFor('sendMessage', (c) => String(c.body.text).startsWith('Slow down'));
      clock.advance(29_999);
      telegram!.pushUpdate(dm('a3'));
      telegram!.pushUpdate(dm('/status'));
      await telegram!.waitFor('sendMessage', (c) => String(c.body.text).includes('Status'));
      clock.advance(1);
      telegram!.pushUpdate(dm('a4'));
      await telegram!.waitFor('sendMessage', (c) => String(c.body.text) === 're: a4');
      expect(texts().filter((t) => t.startsWith('re: '))).toEqual(['re: a1', 're: a4']);
      expect(texts().filter((t) => t.startsWith('Slow down'))).toHaveLength(1);
      expect(fake.requests.map(lastUser)).toEqual(['a1', 'a4']);
    });
  });

  it('says which run budget was reached', async () => {
    const { runBudgetReached } = await import('../../src/agent/runs.ts');
    const limits = { tokenBudget: 1000, maxWallClockMinutes: 60, maxToolCalls: 10 };
    const start = Date.parse('2026-06-01T10:00:00Z');
    const at = (cp: Record<string, number>, minutes = 0) => runBudgetReached({ batch: 1, iteration: 0, correlationId: 'c', startedAt: start, ...cp }, limits, start + minutes * 60_000);
    expect(at({ toolCalls: 9, tokens: 999 }, 59)).toBeUndefined();
    expect(at({ toolCalls: 10 })?.text).toBe('I stopped working on the goal: it reached its tool-call budget (10 of 10 calls, backgroundExecution.maxToolCalls). Say "continue" to go on with a fresh budget, or /goal off to drop the goal.');
    expect(at({ tokens: 1200 })?.which).toBe('tokens');
    expect(at({ tokens: 1200 })?.text).toContain('token budget (1,200 of 1,000 tokens, backgroundExecution.tokenBudget)');
    expect(at({}, 61)?.text).toContain('time budget (61 of 60 minutes, backgroundExecution.maxWallClockMinutes)');
    expect(runBudgetReached({ batch: 1, iteration: 0, correlationId: 'c', toolCalls: 1e6, tokens: 1e9, startedAt: 0 }, { tokenBudget: 0, maxWallClockMinutes: 0, maxToolCalls: 0 }, 1e12)).toBeUndefined();
  });
});

describe('the per-request completion cap', () => {
  it('the offline provider stops at the request\'s maxTokens, as a real model does', async () => {
    const { OfflineProvider } = await import('../../src/providers/offline.ts');
    const provider = new OfflineProvider({ id: 'offline' });
    const request = { model: 'offline', messages: [{ role: 'user' as const, content: 'hello there' }], correlationId: 'c1' };
    const capped = await provider.complete({ ...request, maxTokens: 6 });
    expect(capped.content).toBe('(offline) You');
    expect(capped.usage?.outputTokens).toBeLessThanOrEqual(6);
    expect(capped.finishReason).toBe('length');
    const whole = await provider.complete(request);
    expect(whole.content.startsWith('(offline) You said: "hello there"\n\nI am the offline provider')).toBe(true);
    expect(whole.finishReason).toBe('stop');
  });
});
