import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { writeFileSync, rmSync } from 'node:fs';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger, type Logger } from '../../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../../src/main.ts';
import type { TranscriptMessage } from '../../../src/sessions/transcript.ts';
import { startFakeOpenAI, userText, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../../fakes/fake-openai.ts';
import { testConfig, tempDir } from '../../helpers/gateway.ts';
import { manualTimers, type ManualTimers } from '../timers.ts';
import { fixtureServer } from './fixture-server.ts';
import { capturingLogger, statefulHttpServer } from './mcp-helpers.ts';
import { until } from '../../helpers/wait.ts';

const fixture = path.resolve(import.meta.dirname, 'fixture-server.ts');
const stdio = (env: Record<string, string> = {}) => ({ command: process.execPath, args: ['--import', 'tsx', fixture], env });
const toolNames = (r: RecordedRequest) => ((r.body.tools ?? []) as { function: { name: string } }[]).map((t) => t.function.name);
const lastUser = (r: RecordedRequest) => userText([...r.body.messages].reverse().find((m) => m.role === 'user')?.content);


/** The fake LLM calls the tool named in the user's message (`call <tool> <json>`), then repeats the result. */
function caller(r: RecordedRequest): FakeReply {
  const last = r.body.messages.at(-1)!;
  if (last.role === 'tool') return { content: `result: ${last.content}`, usage: null };
  const m = /^call (\S+) ?(.*)$/.exec(lastUser(r));
  return m ? { toolCalls: [{ id: `c${r.body.messages.length}`, name: m[1]!, arguments: m[2] || '{}' }], usage: null } : { content: 'no call', usage: null };
}

describe('MCP servers', () => {
  let fake: FakeOpenAI;
  let gw: RunningGateway | undefined;
  let tmp: { dir: string; remove: () => void };
  let timers: ManualTimers;
  let http: Server | undefined;

  beforeEach(async () => {
    fake = await startFakeOpenAI(caller);
    tmp = tempDir();
    timers = manualTimers();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    if (http) await new Promise<void>((resolve) => { http!.closeAllConnections(); http!.close(() => resolve()); });
    http = undefined;
    await fake.close();
    tmp.remove();
  });

  let stateful: Awaited<ReturnType<typeof statefulHttpServer>> | undefined;
  afterEach(async () => {
    await stateful?.close();
    stateful = undefined;
  });

  const start = async (config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}, logger: Logger = silentLogger()) => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        session: { reset: { mode: 'off' } }, agents: { defaults: { tools: { preset: 'full' } } }, ...config,
      }, env),
      logger, toolTimeout: timers.timeout, mcpReconnectBaseMs: 20,
    });
    return gw;
  };
  const say = async (text: string) => {
    const response = await fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text }) });
    return ((await response.json()) as { reply: string }).reply;
  };
  const mcpStatus = async () => ((await (await fetch(`${gw!.url}/status`)).json()) as { mcp: { name: string; state: string; tools: number; error?: string }[] }).mcp;
  const metrics = async () => (await (await fetch(`${gw!.url}/metrics`)).text()).split('\n');
  const ready = (name: string) => until(async () => (await mcpStatus()).find((s) => s.name === name && s.state === 'ready'), `${name} to be ready`);

  it('a stdio server\'s tools are sent with their schemas and called; text, errors, images and resources land in the transcript', async () => {
    const log = path.join(tmp.dir, 'fixture.log');
    await start({ mcp: { servers: { fx: stdio({ FIXTURE_LOG: log }) } } });
    expect((await ready('fx')).tools).toBe(8);
    expect(await say('call fx__echo {"text":"hi there"}')).toBe('result: echo: hi there');
    const request = fake.requests[0]!;
    expect(toolNames(request)).toEqual(expect.arrayContaining(['fx__echo', 'fx__slow', 'fx__boom', 'fx__picture', 'fx__die', 'fx__big', 'fx__noop', 'fx__grow']));
    const echo = (request.body.tools as { function: { name: string; parameters: Record<string, unknown> } }[]).find((t) => t.function.name === 'fx__echo')!;
    expect(echo.function.parameters).toEqual({ type: 'object', properties: { text: { type: 'string', description: 'what to echo' } }, required: ['text'] });
    expect(await say('call fx__boom')).toBe('result: Error from the tool: the widget exploded');
    // A result the server marks isError is a failed call in the metrics, not a success.
    expect(await metrics()).toEqual(expect.arrayContaining(['switchboard_tool_calls_total{tool="fx__boom",outcome="error"} 1', 'switchboard_tool_calls_total{tool="fx__echo",outcome="ok"} 1']));
    expect((await metrics()).filter((l) => l.startsWith('switchboard_tool_calls_total{tool="fx__boom",outcome="ok"}'))).toEqual([]);
    expect(await say('call fx__picture')).toBe('result: here it is\n[image: image/png, 3,000 bytes, not shown]\n[resource: file:///tmp/report.txt, text/plain, 1,234 characters]');
    expect(await say('call fx__echo {"text":5}')).toMatch(/^result: Error: invalid arguments for fx__echo: \(arguments\): .*text.*Fix the arguments/);

    // The tool timeout cancels the call on the server too.
    const slow = say('call fx__slow');
    await until(() => existsSync(log) && readFileSync(log, 'utf8').includes('slow started'), 'the slow call to start');
    timers.fireAll();
    expect(await slow).toBe('result: Error: the tool "fx__slow" did not finish within 60 s and was cancelled.');
    await until(() => readFileSync(log, 'utf8').includes('slow cancelled'), 'the server to see the cancellation');
    const history = ((await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent('agent:main:main')}/history`)).json()) as { entries: TranscriptMessage[] }).entries;
    expect(history.filter((e) => e.role === 'tool').map((e) => e.content.slice(0, 20))).toEqual(['echo: hi there', 'Error from the tool:', 'here it is\n[image: i', 'Error: invalid argum', 'Error: the tool "fx_']);
    // /status in the chat lists the server.
    expect(await say('/status')).toContain('• MCP server fx: ready · 8 tools');
  }, 30_000);

  it('a server that exits mid-call: the turn answers with an error result, its tools are left out while it is down (warned once), a later call works', async () => {
    const gate = path.join(tmp.dir, 'down');
    const log = path.join(tmp.dir, 'fixture.log');
    const { logger, lines } = capturingLogger();
    await start({ mcp: { servers: { fx: stdio({ FIXTURE_GATE: gate, FIXTURE_LOG: log }) } } }, {}, logger);
    await ready('fx');
    // From now on every restart of the server exits at once, until the gate is removed.
    writeFileSync(gate, '');
    expect(await say('call fx__die')).toMatch(/^result: Error: the tool "fx__die" failed: .*(closed|Connection)/i);
    await until(async () => (await mcpStatus())[0]!.state === 'failed', 'fx to be failed');
    // Several reconnects fail while the gate is there; each spawns the server once.
    await until(() => readFileSync(log, 'utf8').split('\n').filter((l) => l.endsWith(' gated')).length >= 2, 'two reconnects to fail');
    expect(await say('hello')).toBe('no call');
    expect(toolNames(fake.requests.at(-1)!).filter((n) => n.startsWith('fx__'))).toEqual([]);
    rmSync(gate);
    await ready('fx');
    expect(await say('call fx__echo {"text":"again"}')).toBe('result: echo: again');
    expect(lines.filter((l) => l.level === 40 && l.msg.startsWith('MCP server fx is unavailable'))).toHaveLength(1);
  }, 30_000);

  it('a result over tools.maxResultChars is cut with a note, and counted in /metrics', async () => {
    await start({ mcp: { servers: { fx: stdio() } }, tools: { maxResultChars: 1000 } });
    await ready('fx');
    expect(await say('call fx__big {"n":1500}')).toBe(`result: ${'x'.repeat(1000)}\n[… result cut: 500 more characters not shown]`);
    expect(await metrics()).toContain('switchboard_tool_results_cut_total{tool="fx__big"} 1');
  }, 30_000);

  it('Streamable HTTP: a server that goes away is failed and its tools leave the next request; restarted on the same port it is ready again', async () => {
    stateful = await statefulHttpServer();
    await start({ mcp: { servers: { web: { url: stateful.url } } } });
    await ready('web');
    expect(await say('call web__echo {"text":"one"}')).toBe('result: echo: one');
    await stateful.close();
    expect(await say('call web__echo {"text":"two"}')).toMatch(/^result: Error: the tool "web__echo" failed: .*fetch failed/);
    const failed = await until(async () => (await mcpStatus()).find((s) => s.state === 'failed'), 'web to be failed');
    expect(failed).toMatchObject({ name: 'web', tools: 0, error: expect.stringMatching(/fetch failed|ECONNREFUSED/) });
    await say('hello');
    expect(toolNames(fake.requests.at(-1)!).filter((n) => n.startsWith('web__'))).toEqual([]);
    await stateful.restart();
    await ready('web');
    expect(await say('call web__echo {"text":"three"}')).toBe('result: echo: three');
  }, 30_000);

  it('Streamable HTTP: a server restarted behind our back (its sessions gone, 404) is reconnected, not answered "session not found" forever', async () => {
    stateful = await statefulHttpServer();
    await start({ mcp: { servers: { web: { url: stateful.url } } } });
    await ready('web');
    await stateful.restart();
    expect(await say('call web__echo {"text":"lost"}')).toMatch(/^result: Error: the tool "web__echo" failed: Streamable HTTP error: .*Session not found/);
    await until(async () => stateful!.sessions() === 1 && (await mcpStatus())[0]!.state === 'ready', 'a new session');
    expect(await say('call web__echo {"text":"found"}')).toBe('result: echo: found');
  }, 30_000);

  it('a server that never answers initialize does not delay start-up; /status says failed with the reason', async () => {
    const t0 = Date.now();
    await start({ mcp: { servers: { mute: { ...stdio({ FIXTURE_MODE: 'silent' }), connectTimeoutMs: 500 }, fx: stdio() } } });
    expect(Date.now() - t0).toBeLessThan(500);
    await ready('fx');
    const failed = await until(async () => (await mcpStatus()).find((s) => s.name === 'mute' && s.state === 'failed'), 'mute to fail');
    expect(failed).toMatchObject({ tools: 0, error: 'timed out after 0.5 s' });
    expect(toolNames((await say('call fx__echo {"text":"x"}'), fake.requests.at(-1)!)).filter((n) => n.startsWith('mute__'))).toEqual([]);
  }, 30_000);

  it('follows tools/list_changed: a tool the server adds is offered in the next request', async () => {
    await start({ mcp: { servers: { fx: stdio() } } });
    await ready('fx');
    expect(await say('call fx__grow')).toBe('result: grown');
    await until(async () => (await mcpStatus())[0]!.tools === 9, 'the new tool to be registered');
    expect(await say('call fx__late {"n":3}')).toBe('result: late 3');
  }, 30_000);

  it('Streamable HTTP: headers from the environment reach the server; tools are called over HTTP', async () => {
    const seen: (string | undefined)[] = [];
    http = createServer(async (req: IncomingMessage, res) => {
      seen.push(req.headers.authorization);
      let raw = '';
      for await (const chunk of req) raw += chunk;
      const server = fixtureServer();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => { void transport.close(); void server.close(); });
      await server.connect(transport);
      await transport.handleRequest(req, res, raw ? JSON.parse(raw) : undefined);
    });
    await new Promise<void>((resolve) => http!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    await start({ mcp: { servers: { web: { url, headers: { Authorization: 'Bearer ${MCP_TOKEN}' } } } } }, { MCP_TOKEN: 'mcp-secret-123' });
    await ready('web');
    expect(await say('call web__echo {"text":"over http"}')).toBe('result: echo: over http');
    expect(seen.length).toBeGreaterThan(1);
    expect(seen.every((h) => h === 'Bearer mcp-secret-123')).toBe(true);
    expect(gw!.config.secrets).toContain('Bearer mcp-secret-123');
  }, 30_000);

  it('doctor starts each server once: ready with its tool count, or failed with the reason', async () => {
    const { probeMcpServers } = await import('../../../src/tools/mcp/mcp-probe.ts');
    const config = testConfig(tmp.dir, { mcp: { servers: { fx: stdio(), broken: { command: path.join(tmp.dir, 'no-such-server') } } } });
    const report = await probeMcpServers(config);
    expect(report.find((r) => r.name === 'fx')).toMatchObject({ state: 'ready', tools: 8 });
    expect(report.find((r) => r.name === 'broken')).toMatchObject({ state: 'failed', tools: 0, error: expect.stringMatching(/ENOENT|no-such-server|closed/) });
  }, 30_000);

  it('presets: messaging sends no MCP tools, full sends them, allow takes a group, deny removes one', async () => {
    await start({ mcp: { servers: { fx: stdio() } }, agents: { defaults: { tools: { preset: 'messaging' } } } });
    await ready('fx');
    await say('hello');
    expect(toolNames(fake.requests.at(-1)!).some((n) => n.startsWith('fx__'))).toBe(false);
    await say('/tools full');
    await say('hello');
    expect(toolNames(fake.requests.at(-1)!).filter((n) => n.startsWith('fx__'))).toHaveLength(8);
    await gw!.stop();
    await start({ mcp: { servers: { fx: stdio() } }, agents: { defaults: { tools: { preset: 'minimal', allow: ['mcp:fx'], deny: ['fx__die', 'memory_search'] } } } });
    await ready('fx');
    await say('/tools default');
    await say('hello');
    expect(toolNames(fake.requests.at(-1)!).sort()).toEqual(['fx__big', 'fx__boom', 'fx__echo', 'fx__grow', 'fx__noop', 'fx__picture', 'fx__slow', 'memory_write']);
  }, 30_000);
});
