import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../../src/main.ts';
import { startFakeOpenAI, userText, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../../fakes/fake-openai.ts';
import { testConfig, tempDir } from '../../helpers/gateway.ts';
import { until } from '../../helpers/wait.ts';
import { manualTimers, type ManualTimers } from '../timers.ts';
import { capturingLogger } from './mcp-helpers.ts';

const fixture = path.resolve(import.meta.dirname, 'fixture-server.ts');
const KEY = 'agent:main:main';

/** The fake LLM calls the tool named in the user's message (`call <tool> <json>`), then repeats the result. */
function caller(r: RecordedRequest): FakeReply {
  const last = r.body.messages.at(-1)!;
  if (last.role === 'tool') return { content: `result: ${last.content}`, usage: null };
  const m = /^call (\S+) ?(.*)$/.exec(userText([...r.body.messages].reverse().find((x) => x.role === 'user')?.content));
  return m ? { toolCalls: [{ id: `c${r.body.messages.length}`, name: m[1]!, arguments: m[2] || '{}' }], usage: null } : { content: 'no call', usage: null };
}

/** Issue 13: the turn's AbortSignal reaches the MCP server (cancellation), not only the tool timeout. */
describe('MCP: /stop cancels a call in flight on the server', () => {
  let fake: FakeOpenAI;
  let gw: RunningGateway | undefined;
  let tmp: ReturnType<typeof tempDir>;
  let timers: ManualTimers;
  let log: string;

  beforeEach(async () => {
    fake = await startFakeOpenAI(caller);
    tmp = tempDir();
    timers = manualTimers();
    log = path.join(tmp.dir, 'fixture.log');
    const { logger } = capturingLogger();
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        session: { reset: { mode: 'off' } }, agents: { defaults: { tools: { preset: 'full' } } },
        mcp: { servers: { fx: { command: process.execPath, args: ['--import', 'tsx', fixture], env: { FIXTURE_LOG: log } } } },
      }),
      // The tool timeout fires only when the test says so (never here): only the stop can end the call.
      logger, toolTimeout: timers.timeout,
    });
    await until(async () => ((await (await fetch(`${gw!.url}/status`)).json()) as { mcp: { name: string; state: string }[] }).mcp.find((s) => s.name === 'fx' && s.state === 'ready'), 'fx to be ready');
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await fake.close();
    tmp.remove();
  });

  const say = async (text: string) => {
    const response = await fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text }) });
    expect(response.status).toBe(200);
    return ((await response.json()) as { reply: string }).reply;
  };
  const fixtureLog = () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').map((line) => line.replace(/^\d+ /, '')) : []);
  /** Starts a turn whose fx__slow call is running on the server (the promise is wrapped: awaiting it would wait for the turn). */
  const slowCallInFlight = async () => {
    const turn = say('call fx__slow');
    await until(() => fixtureLog().includes('slow started'), 'the slow call to reach the server');
    expect(fixtureLog()).not.toContain('slow cancelled');
    // Only the 60 s tool timeout is armed, and it never fires by itself here.
    expect(timers.pending()).toEqual([60_000]);
    return { turn };
  };
  const entry = async () => (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(KEY)}`)).json()) as { runState: string };
  const afterStop = async (turn: Promise<string>) => {
    // The turn ends as stopped at once: the call is not left to run out its 60 s (+5 s SDK) timeouts.
    expect(await turn).toBe('⏹ Stopped.');
    await until(() => fixtureLog().includes('slow cancelled'), 'the server to log the cancellation');
    expect(fixtureLog().filter((line) => line.startsWith('slow'))).toEqual(['slow started', 'slow cancelled']);
    expect(timers.pending()).toEqual([]);
    expect(fake.requests).toHaveLength(1);
    expect((await entry()).runState).toBe('idle');
    // The stopped call has its result at once, saying the user stopped it (not that the gateway restarted).
    const history = (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(KEY)}/history`)).json()) as { entries: { role: string; content: string }[] };
    expect(history.entries.at(-1)).toMatchObject({ role: 'tool', content: 'Error: stopped: the user stopped this turn (/stop) while fx__slow was running. Check whether it took effect before calling it again.' });
    // The session goes on: the server is still there and answers the next call.
    expect(await say('call fx__echo {"text":"after"}')).toBe('result: echo: after');
    // The stopped call is answered in the next request (a tool message for its id), so the history stays valid.
    const next = fake.requests[1]!.body.messages;
    expect(next.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user']);
    expect(next[3]).toMatchObject({ role: 'tool', tool_call_id: 'c2', content: expect.stringMatching(/^Error: stopped: the user stopped this turn/) });
    expect(fixtureLog().filter((line) => line.startsWith('slow') || line.startsWith('echo'))).toEqual(['slow started', 'slow cancelled', 'echo after']);
  };

  it('/stop in the chat: the server gets the cancellation and the turn ends stopped', async () => {
    const { turn } = await slowCallInFlight();
    expect(await say('/stop')).toMatch(/^Stopped\./);
    await afterStop(turn);
  }, 30_000);

  it('POST /admin/sessions/:key/stop: the server gets the cancellation and the turn ends stopped', async () => {
    const { turn } = await slowCallInFlight();
    const stop = await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(KEY)}/stop`, { method: 'POST' });
    expect(stop.status).toBe(200);
    expect(await stop.json()).toMatchObject({ sessionKey: KEY, stopped: true });
    await afterStop(turn);
  }, 30_000);
});
