import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import type { TimeoutHandle } from '../../src/tools/timeout.ts';
import { userText, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { testConfig } from '../helpers/gateway.ts';
import { gatewayHttp } from '../helpers/gateway-http.ts';
import { until } from '../helpers/wait.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

const firstUser = (r: RecordedRequest) => userText(r.body.messages.find((m) => m.role === 'user')?.content);
const last = (r: RecordedRequest) => r.body.messages.at(-1)!;
const lastUser = (r: RecordedRequest) => userText(r.body.messages.findLast((m) => m.role === 'user')?.content);
const call = (id: string, name: string, args: Record<string, unknown>): FakeReply => ({
  toolCalls: [{ id, name, arguments: JSON.stringify(args) }], usage: { prompt_tokens: 120, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 100 } },
});

/** Timers the test fires by hand; `asked` lists every duration requested, in ms. */
function manualTimeouts() {
  const asked: number[] = [];
  const controllers = new Map<number, AbortController[]>();
  return {
    asked,
    timeout(ms: number): TimeoutHandle {
      asked.push(ms);
      const controller = new AbortController();
      controllers.set(ms, [...(controllers.get(ms) ?? []), controller]);
      return { signal: controller.signal, clear: () => undefined };
    },
    fire(ms: number) {
      for (const c of controllers.get(ms) ?? []) c.abort(new Error('timeout'));
    },
  };
}

/** SPEC §11: `sessions` list gives each session's token totals; `sessions_yield` waits at most 600 s. */
describe('session tools: token totals and the yield cap', () => {
  const fake = useFakeOpenAI();
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  let timers: ReturnType<typeof manualTimeouts>;

  beforeEach(async () => {
    timers = manualTimeouts();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const start = async () => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        session: { dmScope: 'per-peer', reset: { mode: 'off' } }, tools: { sessions: { visibility: 'all' } },
      }),
      logger: silentLogger(), toolTimeout: (ms) => timers.timeout(ms),
    });
  };
  const http = gatewayHttp(() => gw!.url!);

  it('list: each session has tokens {input, output, cacheRead, cacheWrite} and totalTokens', async () => {
    fake.fallback = (r) => {
      if (firstUser(r) === 'hi') return { content: 'hello bob', usage: { prompt_tokens: 50, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 10 } } };
      return last(r).role === 'tool' ? { content: `result: ${last(r).content}` } : call('l1', 'sessions', { action: 'list' });
    };
    await start();
    expect(await http.say('bob', 'hi')).toBe('hello bob');
    const reply = await http.say('alice', 'who is here?');
    const listed = JSON.parse(reply.slice('result: '.length)) as { sessions: { key: string; tokens: unknown; totalTokens: number }[] };
    const byKey = Object.fromEntries(listed.sessions.map((s) => [s.key, { tokens: s.tokens, totalTokens: s.totalTokens }]));
    expect(byKey).toEqual({
      'agent:main:direct:bob': { tokens: { input: 40, output: 4, cacheRead: 10, cacheWrite: 0 }, totalTokens: 54 },
      'agent:main:direct:alice': { tokens: { input: 20, output: 7, cacheRead: 100, cacheWrite: 0 }, totalTokens: 127 },
    });
  });

  it('sessions_yield with timeoutSeconds 900 is not refused: it waits 600 s at most, then says so', async () => {
    let releaseBob!: () => void;
    const bobHeld = new Promise<void>((resolve) => { releaseBob = resolve; });
    fake.fallback = async (r) => {
      // Bob's request for the yielded message has his earlier "hi" first: it is told apart by its last user message,
      // and held, so the yield can only end by its 600 s timer (it raced the timer before, and sometimes won).
      if (lastUser(r) === 'are you there?') { await bobHeld; return { content: 'yes' }; }
      if (firstUser(r) === 'hi') return { content: 'hello bob' };
      return last(r).role === 'tool' ? { content: `result: ${last(r).content}` } : call('y1', 'sessions_yield', { sessionKey: 'agent:main:direct:bob', message: 'are you there?', timeoutSeconds: 900 });
    };
    await start();
    expect(await http.say('bob', 'hi')).toBe('hello bob');
    let early: string | undefined;
    const asking = http.say('alice', 'ask bob').then((reply) => (early = reply));
    await until(() => timers.asked.includes(600_000) || early !== undefined, 'the yield to start its 600 s wait');
    expect(early).toBeUndefined();
    expect(timers.asked).not.toContain(900_000);
    expect(timers.asked).toContain(605_000);
    timers.fire(600_000);
    expect(JSON.parse((await asking).slice('result: '.length))).toEqual({ status: 'timeout', note: 'No answer within 600 s; the other session\'s run goes on.' });
    releaseBob();
  });
});
