import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { loadConfig } from '../src/config/load.ts';
import { silentLogger } from '../src/core/logger.ts';
import type { InboundMessage } from '../src/core/message.ts';
import { startGateway, type RunningGateway } from '../src/main.ts';
import { nowMs, round } from './stats.ts';

const fixture = path.resolve(import.meta.dirname, '../test/tools/mcp/fixture-server.ts');
const server = { command: process.execPath, args: ['--import', 'tsx', fixture] };

async function gateway(dir: string, servers: number): Promise<{ gw: RunningGateway; startMs: number }> {
  const config = loadConfig({
    cwd: dir, env: {}, dotenv: false,
    overrides: {
      stateDir: path.join(dir, `data-${servers}`), logLevel: 'silent', agents: { defaults: { workspace: path.join(dir, 'workspace') } },
      mcp: { servers: Object.fromEntries(Array.from({ length: servers }, (_, i) => [`fx${i}`, server])) },
    },
  });
  const t0 = nowMs();
  const gw = await startGateway({ config, listen: false, adapters: [], logger: silentLogger() });
  return { gw, startMs: nowMs() - t0 };
}

async function untilReady(gw: RunningGateway): Promise<void> {
  for (;;) {
    const report = await gw.status();
    if (report.mcp.every((m) => m.state === 'ready')) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * Start-up with 3 stdio servers against none, and one MCP call (the fixture's no-op tool, so the server's own
 * work is nil) through the gateway against the SDK client alone. `gatewayOverDirect` ≥ 1 is the gateway's overhead.
 */
export async function runMcpBench(options: { dir: string; calls: number }): Promise<Record<string, number>> {
  const none = await gateway(options.dir, 0);
  await none.gw.stop();
  const three = await gateway(options.dir, 3);
  const t0 = nowMs();
  await untilReady(three.gw);
  const readyMs = three.startMs + (nowMs() - t0);

  const registry = three.gw.runtime.tools;
  const enabled = registry.schemasFor({ preset: 'full', allow: [], deny: [] });
  const message = { id: 'b', channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: 'b', peerId: 'b', sender: { id: 'b' }, text: '', attachments: [], mentionsBot: true, receivedAt: 0 } as InboundMessage;
  const entry = { key: 'agent:main:main', agentId: 'main' } as never;
  const context = { entry, message, correlationId: 'bench', signal: new AbortController().signal, logger: silentLogger(), workspace: options.dir, timezone: 'UTC', now: () => Date.now(), lendSlot: <T>(w: () => Promise<T>) => w() };
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(new StdioClientTransport(server));
  const viaGateway = async () => { await registry.execute({ id: 'c', name: 'fx0__noop', arguments: '{}' }, enabled, context); };
  const direct = async () => { await client.callTool({ name: 'noop', arguments: {} }); };
  const time = async (f: () => Promise<void>) => { const s = nowMs(); for (let i = 0; i < options.calls; i++) await f(); return ((nowMs() - s) * 1000) / options.calls; };
  await time(viaGateway);
  await time(direct);
  const gatewayUs: number[] = [];
  const directUs: number[] = [];
  for (let r = 0; r < 3; r++) {
    directUs.push(await time(direct));
    gatewayUs.push(await time(viaGateway));
  }
  await client.close();
  await three.gw.stop();
  const g = Math.min(...gatewayUs);
  const d = Math.min(...directUs);
  return {
    startNoServersMs: round(none.startMs, 1), startThreeServersMs: round(three.startMs, 1), threeServersReadyMs: round(readyMs, 1),
    directCallUs: round(d, 1), gatewayCallUs: round(g, 1), gatewayOverDirect: round(g / d, 3),
  };
}
