import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../../fakes/fake-openai.ts';
import { testConfig, tempDir } from '../../helpers/gateway.ts';
import { capturingLogger, type LogLine } from '../../helpers/log-capture.ts';
import { until } from '../../helpers/wait.ts';
import { manualTimers, type ManualTimers } from '../timers.ts';
import { lastUser } from '../../fakes/fake-openai.ts';

const fixture = path.resolve(import.meta.dirname, 'fixture-server.ts');
const stdio = (env: Record<string, string> = {}) => ({ command: process.execPath, args: ['--import', 'tsx', fixture], env });
const toolNames = (r: RecordedRequest) => ((r.body.tools ?? []) as { function: { name: string } }[]).map((t) => t.function.name);

/** The fake LLM calls the tool named in the user's message (`call <tool> <json>`), then repeats the result. */
function caller(r: RecordedRequest): FakeReply {
  const last = r.body.messages.at(-1)!;
  if (last.role === 'tool') return { content: `result: ${last.content}`, usage: null };
  const m = /^call (\S+) ?(.*)$/.exec(lastUser(r));
  return m ? { toolCalls: [{ id: `c${r.body.messages.length}`, name: m[1]!, arguments: m[2] || '{}' }], usage: null } : { content: 'no call', usage: null };
}

/** Issue 33: a message that arrives right after start is answered with the tools of the servers still connecting. */
describe('MCP servers still connecting when a message arrives', () => {
  let fake: FakeOpenAI;
  let gw: RunningGateway | undefined;
  let tmp: ReturnType<typeof tempDir>;
  let lines: LogLine[];
  let timers: ManualTimers;

  beforeEach(async () => {
    fake = await startFakeOpenAI(caller);
    tmp = tempDir();
    timers = manualTimers();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await fake.close();
    tmp.remove();
  });

  const start = async (mcp: Record<string, unknown>, options: { waitTimer?: boolean } = {}) => {
    const captured = capturingLogger();
    lines = captured.lines;
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        // One session per person: alice's /tools is hers alone.
        session: { reset: { mode: 'off' }, dmScope: 'per-peer' }, agents: { defaults: { tools: { preset: 'full' } } }, mcp,
      }),
      logger: captured.logger, mcpReconnectBaseMs: 20, ...(options.waitTimer ? { mcpWaitTimeout: timers.timeout } : {}),
    });
    return gw;
  };
  const say = async (user: string, text: string) => {
    const response = await fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }) });
    expect(response.status).toBe(200);
    return { reply: ((await response.json()) as { reply: string }).reply, correlationId: response.headers.get('x-correlation-id') };
  };
  const mcpStatus = async () => ((await (await fetch(`${gw!.url}/status`)).json()) as { mcp: { name: string; state: string; tools: number }[] }).mcp;
  const readyz = async () => {
    const response = await fetch(`${gw!.url}/readyz`);
    return { status: response.status, body: (await response.json()) as { ready: boolean; failing?: { part: string; name: string; state?: string }[] } };
  };
  const leftOut = () => lines.filter((l) => l.msg.startsWith('left out of this turn'));

  it('a server that takes 2 s to start: /status and /readyz show it connecting, a message sent at once gets its tools in the first request, /readyz turns 200', async () => {
    const gate = path.join(tmp.dir, 'down');
    writeFileSync(gate, '');
    // A bound far over the 2 s, so a loaded machine's slow start of the child does not fail fx instead.
    await start({ connectTimeoutMs: 30_000, servers: { fx: stdio({ FIXTURE_DELAY_MS: '2000' }), gone: stdio({ FIXTURE_GATE: gate }) } });
    await gw!.supervisor.firstAttempts();
    // From the first moment both servers are listed; fx is connecting for 2 s.
    const first = await mcpStatus();
    expect(first.map((s) => s.name)).toEqual(['fx', 'gone']);
    expect(first[0]).toMatchObject({ state: 'connecting', tools: 0 });
    const before = await readyz();
    expect(before.status).toBe(503);
    expect(before.body.failing).toContainEqual({ part: 'mcp', name: 'fx', state: 'connecting', error: 'connecting' });
    expect(before.body.failing!.every((f) => f.part === 'mcp')).toBe(true);

    const { reply } = await say('alice', 'call fx__echo {"text":"early"}');
    expect(reply).toBe('result: echo: early');
    expect(toolNames(fake.requests[0]!)).toEqual(expect.arrayContaining(['fx__echo', 'fx__slow', 'fx__grow']));
    expect(toolNames(fake.requests[0]!).some((n) => n.startsWith('gone__'))).toBe(false);
    const readyAt = lines.findIndex((l) => l.msg === 'MCP server ready' && l.mcpServer === 'fx');
    const turnAt = lines.findIndex((l) => l.msg.startsWith('turn replied'));
    expect(readyAt).toBeGreaterThanOrEqual(0);
    expect(readyAt).toBeLessThan(turnAt);
    expect(leftOut().filter((l) => l.msg.includes('MCP server fx'))).toEqual([]);

    // Ready once fx is ready and gone has failed once; gone retrying later does not make it unready again.
    const after = await until(async () => { const r = await readyz(); return r.status === 200 && r; }, '/readyz to answer 200');
    expect(after.body).toEqual({ ready: true });
    const states = Object.fromEntries((await mcpStatus()).map((s) => [s.name, s.state]));
    expect(states.fx).toBe('ready');
    expect(['failed', 'reconnecting']).toContain(states.gone);
    await until(async () => (await mcpStatus())[1]!.state === 'reconnecting', 'gone to reconnect');
    expect((await readyz()).status).toBe(200);
  }, 60_000);

  it('a server that never answers: a full session waits up to the bound, then goes on once without it and says so in its log; a messaging session does not wait', async () => {
    await start({ connectTimeoutMs: 60_000, servers: { mute: stdio({ FIXTURE_MODE: 'silent' }) } }, { waitTimer: true });
    // A session whose tools would not include the server answers at once.
    expect((await say('alice', '/tools messaging')).reply).toMatch(/messaging/);
    expect((await say('alice', 'hello')).reply).toBe('no call');
    expect(timers.pending()).toEqual([]);
    expect(fake.requests).toHaveLength(1);

    const turn = say('bob', 'hello');
    await until(() => timers.pending().length === 1, 'the turn to wait for mute');
    expect(timers.pending()).toEqual([60_000]);
    expect(fake.requests).toHaveLength(1);
    expect((await mcpStatus())[0]).toMatchObject({ name: 'mute', state: 'connecting' });
    timers.fire(60_000);
    const { reply, correlationId } = await turn;
    expect(reply).toBe('no call');
    expect(fake.requests).toHaveLength(2);
    expect(toolNames(fake.requests[1]!).some((n) => n.startsWith('mute__'))).toBe(false);
    expect(leftOut()).toEqual([expect.objectContaining({
      level: 40, correlationId, sessionKey: expect.stringContaining('bob'), msg: 'left out of this turn: MCP server mute (still connecting after 60 s)',
    })]);
    expect((await readyz()).body.failing).toEqual([{ part: 'mcp', name: 'mute', state: 'connecting', error: 'connecting' }]);
  }, 30_000);

  it('with the real timer and a short connectTimeoutMs, the turn goes on after the bound, once, with the line', async () => {
    await start({ connectTimeoutMs: 2000, servers: { mute: stdio({ FIXTURE_MODE: 'silent' }) } });
    const asked: number[] = [];
    fake.fallback = (r) => { asked.push(Date.now()); return caller(r); };
    const { reply } = await say('bob', 'hello');
    expect(reply).toBe('no call');
    expect(asked).toHaveLength(1);
    expect(leftOut()).toHaveLength(1);
    expect(leftOut()[0]!.msg).toMatch(/^left out of this turn: MCP server mute \((still connecting after|timed out after) 2 s\)$/);
    // The model was asked only once the wait was over.
    expect(asked[0]).toBeGreaterThanOrEqual(Date.parse(leftOut()[0]!.time as string));
  }, 30_000);
});
