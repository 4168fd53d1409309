import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger, type Logger } from '../../../src/core/logger.ts';
import type { InboundMessage } from '../../../src/core/message.ts';
import { McpServerConnection } from '../../../src/tools/mcp/mcp-server.ts';
import { ToolRegistry } from '../../../src/tools/registry.ts';
import { until } from '../../helpers/wait.ts';
import { capturingLogger, statefulHttpServer } from './mcp-helpers.ts';

const fixture = path.resolve(import.meta.dirname, 'fixture-server.ts');
const stdio = (env: Record<string, string> = {}) => ({ command: process.execPath, args: ['--import', 'tsx', fixture], env, enabled: true });
const context = {
  entry: { key: 'agent:main:main', agentId: 'main' } as never,
  message: { id: 'm', channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: 'c', peerId: 'p', sender: { id: 'p' }, text: '', attachments: [], mentionsBot: true, receivedAt: 0 } as InboundMessage,
  correlationId: 't', signal: new AbortController().signal, logger: silentLogger(), workspace: '/tmp', timezone: 'UTC', now: () => 0,
  lendSlot: <T>(work: () => Promise<T>) => work(),
};

describe('one MCP server connection', () => {
  const open: McpServerConnection[] = [];
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of open.splice(0)) await c.stop();
    for (const close of closers.splice(0)) await close();
  });

  const connect = (config: Record<string, unknown>, extra: Partial<ConstructorParameters<typeof McpServerConnection>[0]> = {}, logger: Logger = silentLogger()) => {
    const registry = new ToolRegistry({ timeoutMs: 10_000, maxResultChars: 10_000 });
    const connection = new McpServerConnection({
      name: 'fx', config: config as never, registry, logger, connectTimeoutMs: 10_000, callTimeoutMs: 10_000, reconnectBaseMs: 20, ...extra,
    });
    open.push(connection);
    connection.start();
    return { connection, registry };
  };

  it('a ready Streamable HTTP server is pinged: restarted (its session gone) it is noticed without any call and reconnected', async () => {
    const http = await statefulHttpServer();
    closers.push(() => http.close());
    const { connection, registry } = connect({ url: http.url, enabled: true }, { pingIntervalMs: 20 });
    await until(() => connection.status().state === 'ready', 'ready');
    const states: string[] = [];
    const watch = setInterval(() => states.push(connection.status().state), 1);
    await http.restart();
    await until(() => http.sessions() === 1 && connection.status().state === 'ready', 'a new session');
    clearInterval(watch);
    expect(states).toContain('failed');
    const enabled = registry.schemasFor({ preset: 'full', allow: [], deny: [] });
    expect(await registry.execute({ id: 'c', name: 'fx__echo', arguments: '{"text":"pinged"}' }, enabled, context)).toEqual({ outcome: 'ok', content: 'echo: pinged' });
  }, 30_000);

  it('a server that crashes right after initialize keeps backing off and is warned about once, until it stayed up for a while', async () => {
    let clock = 1_000_000;
    let running = false;
    const { logger, lines } = capturingLogger();
    // Frozen, then (running) 30 s further at every reading: every readiness has lasted long enough.
    connect(stdio({ FIXTURE_MODE: 'crash' }), { now: () => (running ? (clock += 30_000) : clock), stableAfterMs: 30_000 }, logger);
    const delays = () => lines.filter((l) => l.msg === 'MCP server reconnect scheduled').map((l) => (l as unknown as { delayMs: number }).delayMs);
    const warnings = () => lines.filter((l) => l.msg.startsWith('MCP server fx is unavailable')).length;
    await until(() => delays().length >= 4, 'four crashes', 12_000);
    // 20 ms doubling (±20 %): the fourth wait is at least 8 × 20 × 0.8 / 1.2 ms, never back at the first.
    expect(delays()[3]).toBeGreaterThan(100);
    expect(warnings()).toBe(1);
    expect(lines.filter((l) => l.msg === 'MCP server ready')).toHaveLength(1);
    running = true;
    const seen = delays().length;
    await until(() => warnings() >= 2 && delays().length > seen + 1, 'a second outage', 12_000);
    expect(delays().slice(seen + 1).some((d) => d < 25)).toBe(true);
  }, 60_000);

  it('the first attempt is connecting, later ones reconnecting; a wait for the attempt settles when it ends', async () => {
    const gate = path.join(tmpdir(), `switchboard-gate-${process.pid}-${Date.now()}`);
    writeFileSync(gate, '');
    closers.push(async () => rmSync(gate, { force: true }));
    // Every state after the first (onChange runs once inside start(), before `watched` is set).
    const states: string[] = [];
    let watched: McpServerConnection | undefined;
    const { connection } = connect(stdio({ FIXTURE_GATE: gate }), { onChange: () => { if (watched) states.push(watched.status().state); } });
    watched = connection;
    const first = connection.whenSettled();
    expect(connection.status().state).toBe('connecting');
    await first;
    expect(connection.status().state).toBe('failed');
    expect(connection.whenSettled()).toBeUndefined();
    await until(() => connection.status().state === 'reconnecting', 'a reconnect');
    rmSync(gate);
    await until(() => connection.status().state === 'ready', 'ready');
    expect(states).not.toContain('connecting');
    expect(states).toEqual(expect.arrayContaining(['failed', 'reconnecting', 'ready']));
  }, 30_000);

  it('stop() during an attempt ends it at once: a server that never answers is not left running', async () => {
    const log = path.join(tmpdir(), `switchboard-fixture-${process.pid}-${Date.now()}.log`);
    closers.push(async () => rmSync(log, { force: true }));
    const { connection } = connect(stdio({ FIXTURE_MODE: 'silent', FIXTURE_LOG: log }), { connectTimeoutMs: 60_000 });
    const pid = Number(await until(() => existsSync(log) && /^(\d+) started/m.exec(readFileSync(log, 'utf8'))?.[1], 'the server to start'));
    const settled = connection.whenSettled()!;
    await connection.stop();
    await settled;
    expect(connection.status().state).toBe('stopped');
    await until(() => { try { process.kill(pid, 0); return false; } catch { return true; } }, 'the server to exit');
  }, 30_000);

  it('tools/list_changed reads every page of the new list', async () => {
    const { connection, registry } = connect(stdio({ FIXTURE_MODE: 'paged' }));
    await until(() => connection.status().state === 'ready', 'ready');
    expect(connection.status().tools).toBe(8);
    const enabled = registry.schemasFor({ preset: 'full', allow: [], deny: [] });
    expect((await registry.execute({ id: 'c', name: 'fx__grow', arguments: '{}' }, enabled, context)).content).toBe('grown');
    await until(() => registry.get('fx__late'), 'the new tool');
    expect(connection.status().tools).toBe(9);
    expect(registry.names().filter((n) => n.startsWith('fx__')).sort()).toEqual(['fx__big', 'fx__boom', 'fx__die', 'fx__echo', 'fx__grow', 'fx__late', 'fx__noop', 'fx__picture', 'fx__slow']);
  }, 30_000);

  it('a call whose tools were registered again between the response and the call (refresh, reconnect) still runs', async () => {
    const { connection, registry } = connect(stdio());
    await until(() => connection.status().state === 'ready', 'ready');
    const enabled = registry.schemasFor({ preset: 'full', allow: [], deny: [] });
    expect((await registry.execute({ id: 'c', name: 'fx__grow', arguments: '{}' }, enabled, context)).content).toBe('grown');
    await until(() => registry.get('fx__late'), 'the refresh');
    // `enabled` holds the schema objects from before the refresh.
    expect(await registry.execute({ id: 'c', name: 'fx__echo', arguments: '{"text":"still"}' }, enabled, context)).toEqual({ outcome: 'ok', content: 'echo: still' });
  }, 30_000);

  it('an isError result is outcome error, the server\'s words kept', async () => {
    const { connection, registry } = connect(stdio());
    await until(() => connection.status().state === 'ready', 'ready');
    const enabled = registry.schemasFor({ preset: 'full', allow: [], deny: [] });
    expect(await registry.execute({ id: 'c', name: 'fx__boom', arguments: '{}' }, enabled, context)).toEqual({ outcome: 'error', content: 'Error from the tool: the widget exploded' });
  }, 30_000);
});
