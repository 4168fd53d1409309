import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { userText, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { testConfig } from '../helpers/gateway.ts';
import { gatewayHttp } from '../helpers/gateway-http.ts';
import { until } from '../helpers/wait.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

const toolRounds = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
const lastUser = (r: RecordedRequest) => userText([...r.body.messages].reverse().find((m) => m.role === 'user')?.content);
const search = (n: number, count = 1): FakeReply => ({
  toolCalls: Array.from({ length: count }, (_, i) => ({ id: `t${n}-${i}`, name: 'memory_search', arguments: '{"query":"anything"}' })),
  usage: { prompt_tokens: 20, completion_tokens: 2 },
});
/** A deferred the fake LLM can wait on. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => { open = resolve; });
  return { open, opened };
}
const KEY = 'agent:main:direct:alice';

describe('goal runs: counters, budgets and what is counted', () => {
  const fake = useFakeOpenAI();
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const start = async (config: Record<string, unknown>) => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        session: { dmScope: 'per-peer', reset: { mode: 'off' } }, ...config,
      }),
      logger: silentLogger(),
    });
    return gw;
  };
  const http = gatewayHttp(() => gw!.url!);
  const { entry, metric, history } = http;
  const say = (text: string) => http.say('alice', text);

  it('a tool name the model made up is counted as tool="unknown", never as a label of its choosing', async () => {
    fake.fallback = (r) => (toolRounds(r) === 0
      ? { toolCalls: [{ id: 'x1', name: 'format_the_disk_now', arguments: '{}' }] }
      : { content: 'no such tool, sorry' });
    await start({});
    expect(await say('do it')).toBe('no such tool, sorry');
    expect(await metric('switchboard_tool_calls_total{tool="unknown",outcome="unknown_tool"}')).toBe(1);
    expect(await (await fetch(`${gw!.url}/metrics`)).text()).not.toContain('format_the_disk_now');
  });

  it('a background batch stopped by /stop is counted as outcome "stopped"', async () => {
    const held = gate();
    fake.fallback = async (r) => {
      if (lastUser(r).startsWith('[background_auto_continue]')) await held.opened;
      return search(toolRounds(r));
    };
    await start({ agents: { defaults: { maxIterationsPerBatch: 1 } }, backgroundExecution: { enabled: true } });
    await say('/goal never stop');
    expect(await say('work')).toBe('This needs more than 1 step. I\'m continuing in the background toward the goal (never stop) and will post the result here. /stop pauses it, /goal off ends it.');
    await until(() => gw!.gateway.background.running === 1 || undefined, 'the background batch to start');
    await say('/stop');
    held.open();
    await until(async () => (await metric('switchboard_background_batches_total{outcome="stopped"}')) === 1, 'the stopped batch to be counted');
    expect((await entry(KEY)).runState).toBe('paused');
  });

  it('/goal off on a run left "running" (its turn died) ends it idle, and /admin/runs no longer lists it', async () => {
    await start({ backgroundExecution: { enabled: true } });
    await say('/goal tidy up');
    const session = await gw!.sessions.acquire({ ...(await gw!.sessions.get(KEY))! });
    session.entry.runState = 'running';
    await gw!.sessions.save(session.entry);
    gw!.sessions.release(session);
    expect(await say('/goal off')).toBe('Goal cleared (tidy up); background work on it ends.');
    expect((await entry(KEY)).runState).toBe('idle');
    expect(await (await fetch(`${gw!.url}/admin/runs`)).json()).toEqual({ runs: [] });
  });

  it('a user message in the middle of a goal run counts as its next batch: maxBatchesPerGoal holds, with a run_budget refusal', async () => {
    const held = gate();
    let holding = true;
    fake.fallback = async (r) => {
      if (holding && lastUser(r).startsWith('[background_auto_continue]')) await held.opened;
      return search(toolRounds(r));
    };
    await start({ agents: { defaults: { maxIterationsPerBatch: 1 } }, backgroundExecution: { enabled: true, maxBatchesPerGoal: 3 } });
    await say('/goal keep going');
    await say('go');
    await until(() => gw!.gateway.background.running === 1 || undefined, 'batch 2 to start');
    // Batch 2 is held; the user's message waits behind it on the lane.
    const mid = say('also look at the logs');
    await until(() => gw!.gateway.lanes.depth(KEY) === 1 || undefined, 'the user message to queue');
    holding = false;
    held.open();
    expect(await mid).toBe('I stopped working on the goal after 3 batches of 1 step (the limit is 3 batches per goal). Say "continue" to go on, or /goal off to drop it.');
    await until(async () => gw!.gateway.lanes.runningCount === 0 && gw!.gateway.background.waiting === 0 && gw!.gateway.background.running === 0, 'the run to settle');
    expect(fake.requests).toHaveLength(3);
    expect((await entry(KEY))).toMatchObject({ runState: 'budget-limited', checkpoint: { batch: 3, toolCalls: 3 } });
    expect(await metric('switchboard_refusals_total{reason="run_budget"}')).toBe(1);
  });

  it('"continue" after /stop goes on with the goal\'s tool-call budget; only a new /goal starts it afresh', async () => {
    const held = gate();
    let holding = true;
    fake.fallback = async (r) => {
      if (holding && toolRounds(r) === 2) { holding = false; await held.opened; }
      return search(toolRounds(r));
    };
    await start({ agents: { defaults: { maxIterationsPerBatch: 10 } }, backgroundExecution: { enabled: true, maxToolCalls: 3 } });
    await say('/goal search a lot');
    const first = say('go');
    await until(() => (fake.requests.length === 3) || undefined, 'the third LLM call');
    await say('/stop');
    held.open();
    expect(await first).toBe('⏹ Stopped.');
    expect((await entry(KEY)).checkpoint).toMatchObject({ toolCalls: 2 });
    expect(await say('continue')).toBe('I stopped working on the goal: it reached its tool-call budget (3 of 3 calls, backgroundExecution.maxToolCalls). Say "continue" to go on with a fresh budget, or /goal off to drop the goal.');
    expect(await metric('switchboard_tool_calls_total{tool="memory_search",outcome="ok"}')).toBe(3);
    // A new goal: fresh counters.
    await say('/goal search again');
    expect((await entry(KEY)).checkpoint).toBeUndefined();
    holding = false;
    fake.script.push(search(10), search(11), { content: 'found it' });
    expect(await say('go on')).toBe('found it');
    expect((await entry(KEY)).checkpoint).toMatchObject({ goal: 'search again', batch: 1, toolCalls: 2 });
  });

  it('counts of one read in the singular: "1 batch of 1 step", "1 tool step"', async () => {
    fake.fallback = (r) => search(toolRounds(r));
    await start({ agents: { defaults: { maxIterationsPerBatch: 1 } }, backgroundExecution: { enabled: true, maxBatchesPerGoal: 1 } });
    await say('/goal one at a time');
    expect(await say('go')).toBe('I stopped working on the goal after 1 batch of 1 step (the limit is 1 batch per goal). Say "continue" to go on, or /goal off to drop it.');
    expect(await metric('switchboard_refusals_total{reason="run_budget"}')).toBe(1);
    await say('/goal off');
    expect(await say('go')).toBe('I stopped after 1 tool step without a final answer. Say "continue" to let me go on.');
  });

  it('the tool-call budget holds within one answer: calls past it are not run and get a result saying so', async () => {
    fake.fallback = (r) => (toolRounds(r) === 0 ? search(0, 3) : { content: 'never reached' });
    await start({ backgroundExecution: { enabled: true, maxToolCalls: 2 } });
    await say('/goal search three times at once');
    expect(await say('go')).toBe('I stopped working on the goal: it reached its tool-call budget (2 of 2 calls, backgroundExecution.maxToolCalls). Say "continue" to go on with a fresh budget, or /goal off to drop the goal.');
    expect(fake.requests).toHaveLength(1);
    expect(await metric('switchboard_tool_calls_total{tool="memory_search",outcome="ok"}')).toBe(2);
    const results = (await history(KEY)).filter((e) => e.type === 'message' && e.role === 'tool');
    expect(results.map((e) => e.toolCallId)).toEqual(['t0-0', 't0-1', 't0-2']);
    expect(results[2]!.content).toBe('Error: not run: the goal reached its tool-call budget (2 calls, backgroundExecution.maxToolCalls).');
    expect((await entry(KEY))).toMatchObject({ runState: 'budget-limited', checkpoint: { toolCalls: 2 } });
  });
});
