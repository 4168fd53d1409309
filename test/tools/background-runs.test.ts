import { afterEach, describe, expect, it } from 'vitest';
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

const toolRounds = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
const lastUser = (r: RecordedRequest) => userText([...r.body.messages].reverse().find((m) => m.role === 'user')?.content);
const search = (n: number): FakeReply => ({ toolCalls: [{ id: `t${n}`, name: 'memory_search', arguments: '{"query":"anything"}' }], usage: { prompt_tokens: 20, completion_tokens: 2 } });


describe('background runs', () => {
  const fake = useFakeOpenAI();
  let telegram: FakeTelegram | undefined;
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await telegram?.close();
    telegram = undefined;
  });

  const start = async (config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        session: { dmScope: 'per-peer', reset: { mode: 'off' } }, ...config,
      }, env),
      logger: silentLogger(),
    });
    return gw;
  };
  const http = gatewayHttp(() => gw!.url!);
  const { entry, metric, history: transcript } = http;
  const webchat = (user: string, text: string) => http.say(user, text);

  it('a goal needing 25 LLM calls at 5 per batch runs as 5 batches, the last 4 in the background, and ends completed', async () => {
    fake.fallback = (r) => (toolRounds(r) < 24 ? search(toolRounds(r)) : { content: 'goal reached: 24 searches', usage: { prompt_tokens: 20, completion_tokens: 4 } });
    await start({ agents: { defaults: { maxIterationsPerBatch: 5 } }, backgroundExecution: { enabled: true } });
    expect(await webchat('alice', '/goal search 24 times')).toMatch(/^Goal set: search 24 times\nWork on it goes on in the background/);
    expect(await webchat('alice', 'go')).toMatch(/^This needs more than 5 steps\. I'm continuing in the background toward the goal \(search 24 times\)/);
    const key = 'agent:main:direct:alice';
    const done = await until(async () => { const e = await entry(key); return e.runState === 'completed' ? e : undefined; }, 'the goal to complete');
    expect(fake.requests).toHaveLength(25);
    expect(done.checkpoint).toMatchObject({ goal: 'search 24 times', batch: 5, iteration: 5, toolCalls: 24 });
    const messages = (await transcript(key)).filter((e) => e.type === 'message');
    expect(messages.filter((m) => m.role === 'user').map((m) => m.content.slice(0, 27))).toEqual(['go', ...Array(4).fill('[background_auto_continue] ')]);
    expect(messages.filter((m) => m.role === 'tool')).toHaveLength(24);
    expect(messages.at(-1)!.content).toBe('goal reached: 24 searches');
    expect(await metric('switchboard_background_batches_total{outcome="continuing"}')).toBe(3);
    expect(await metric('switchboard_background_batches_total{outcome="completed"}')).toBe(1);
    expect(await metric('switchboard_tool_calls_total{tool="memory_search",outcome="ok"}')).toBe(24);
  });

  it('ten goals at once: never more than maxConcurrentBackgroundTurns background batches at a time, and all finish', async () => {
    let inFlight = 0;
    let most = 0;
    fake.fallback = async (r) => {
      const background = lastUser(r).startsWith('[background_auto_continue]');
      if (background) { inFlight++; most = Math.max(most, inFlight); }
      await new Promise((resolve) => setTimeout(resolve, 15));
      if (background) inFlight--;
      return toolRounds(r) < 3 ? search(toolRounds(r)) : { content: 'done', usage: { prompt_tokens: 20, completion_tokens: 1 } };
    };
    await start({ agents: { defaults: { maxIterationsPerBatch: 1, maxConcurrent: 8 } }, backgroundExecution: { enabled: true, maxConcurrentBackgroundTurns: 3 } });
    const users = Array.from({ length: 10 }, (_, i) => `u${i}`);
    for (const u of users) await webchat(u, '/goal finish three searches');
    await Promise.all(users.map((u) => webchat(u, 'start')));
    for (const u of users) await until(async () => (await entry(`agent:main:direct:${u}`)).runState === 'completed', `${u} to complete`);
    expect(most).toBeLessThanOrEqual(3);
    expect(most).toBeGreaterThanOrEqual(2);
    expect(await metric('switchboard_background_batches_total{outcome="completed"}')).toBe(10);
  });

  it('maxBatchesPerGoal ends the run budget-limited and tells the user on Telegram; /admin/runs, stop and "continue"', async () => {
    telegram = await startFakeTelegram();
    let hold: Promise<void> | undefined;
    fake.fallback = async (r) => {
      if (hold && lastUser(r).startsWith('[background_auto_continue]')) await hold;
      return search(toolRounds(r));
    };
    await start(
      { channels: { telegram: { dmPolicy: 'open' } }, agents: { defaults: { maxIterationsPerBatch: 2 } }, backgroundExecution: { enabled: true, maxBatchesPerGoal: 2 } },
      { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot },
    );
    telegram.pushUpdate(dm('/goal keep searching'));
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).startsWith('Goal set'));
    telegram.pushUpdate(dm('begin'));
    const limited = await telegram.waitFor('sendMessage', (c) => String(c.body.text).startsWith('I stopped working on the goal'));
    expect(limited.body.text).toBe('I stopped working on the goal after 2 batches of 2 steps (the limit is 2 batches per goal). Say "continue" to go on, or /goal off to drop it.');
    expect(sentTo(telegram, 42).map((c) => String(c.body.text).slice(0, 28))).toEqual(['Goal set: keep searching\nWor', 'This needs more than 2 steps', 'I stopped working on the goa']);
    const key = 'agent:main:direct:42';
    expect((await entry(key)).runState).toBe('budget-limited');
    expect(await metric('switchboard_background_batches_total{outcome="budget-limited"}')).toBe(1);

    // "continue" starts a fresh batch count; hold its background batch to look at it while it is queued.
    let release!: () => void;
    hold = new Promise<void>((resolve) => { release = resolve; });
    telegram.pushUpdate(dm('continue'));
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).startsWith('This needs more than 2 steps') && sentTo(telegram!, 42).length >= 4);
    const runs = await until(async () => {
      const body = (await (await fetch(`${gw!.url}/admin/runs`)).json()) as { runs: { sessionKey: string; runState: string; goal: string }[] };
      return body.runs.length ? body.runs : undefined;
    }, 'the run to be listed');
    expect(runs).toEqual([expect.objectContaining({ sessionKey: key, goal: 'keep searching' })]);
    const stop = await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(key)}/stop`, { method: 'POST' });
    expect(await stop.json()).toMatchObject({ sessionKey: key, runState: 'paused' });
    release();
    await until(async () => (await entry(key)).runState === 'paused' && gw!.gateway.lanes.runningCount === 0 && gw!.gateway.background.running === 0, 'the paused run to settle');
    expect((await entry(key)).runState).toBe('paused');
    expect((await (await fetch(`${gw!.url}/admin/runs`)).json())).toEqual({ runs: [] });
    hold = undefined;
    telegram.pushUpdate(dm('/goal off'));
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).startsWith('Goal cleared'));
    expect((await entry(key))).toMatchObject({ runState: 'idle' });
    expect((await entry(key)).goal).toBeUndefined();
    const missing = await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent('agent:main:direct:nobody')}/stop`, { method: 'POST' });
    expect(missing.status).toBe(404);
  });

  it('a closed web page does not cancel a goal run: the run goes on and completes', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    fake.fallback = async (r) => {
      if (toolRounds(r) === 1) await held;
      return toolRounds(r) < 3 ? search(toolRounds(r)) : { content: 'finished anyway', usage: null };
    };
    await start({ agents: { defaults: { maxIterationsPerBatch: 10 } }, backgroundExecution: { enabled: true } });
    await webchat('alice', '/goal finish even if I leave');
    const page = new AbortController();
    const request = fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text: 'go' }), signal: page.signal }).catch(() => 'closed');
    await until(() => fake.requests.some((r) => toolRounds(r) === 1) || undefined, 'the second LLM call');
    page.abort();
    expect(await request).toBe('closed');
    release();
    const done = await until(async () => { const e = await entry('agent:main:direct:alice'); return e.runState === 'completed' ? e : undefined; }, 'the run to complete');
    expect(done.checkpoint).toMatchObject({ toolCalls: 3 });
    expect((await transcript('agent:main:direct:alice')).at(-1)!.content).toBe('finished anyway');
  });

  it('/stop pauses a goal run and /status shows run state, goal and batch', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    fake.fallback = async (r) => {
      if (lastUser(r).startsWith('[background_auto_continue]')) await held;
      return search(toolRounds(r));
    };
    await start({ agents: { defaults: { maxIterationsPerBatch: 1 } }, backgroundExecution: { enabled: true } });
    await webchat('alice', '/goal never stop');
    await webchat('alice', 'work');
    await until(() => gw!.gateway.background.running === 1 || undefined, 'the background batch to start');
    const status = await webchat('alice', '/status');
    expect(status).toMatch(/• run: running · goal: never stop · batch 2\/10, step 0/);
    expect(await webchat('alice', '/stop')).toBe('Paused the work on the goal (never stop). Say "continue" to resume it, or /goal off to drop it.');
    release();
    await until(async () => gw!.gateway.background.running === 0 && (await entry('agent:main:direct:alice')).runState === 'paused', 'the batch to stop');
    // Nothing further is queued: the paused run does not continue by itself.
    expect(gw!.gateway.background.waiting).toBe(0);
    expect(gw!.gateway.lanes.totalQueued()).toBe(0);
  });
});
