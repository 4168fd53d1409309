import type { ResolvedConfig } from '../../config/resolved.ts';
import { silentLogger } from '../../core/logger.ts';
import { ToolRegistry } from '../registry.ts';
import { McpServerConnection, type McpServerStatus } from './mcp-server.ts';

/** `switchboard doctor`: starts each enabled MCP server once, waits for ready or failed, and stops it. */
export async function probeMcpServers(config: ResolvedConfig): Promise<McpServerStatus[]> {
  return Promise.all(Object.entries(config.mcp.servers).filter(([, s]) => s.enabled).map(async ([name, server]) => {
    const registry = new ToolRegistry({ timeoutMs: 1000, maxResultChars: 1000 });
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => { settle = resolve; });
    let connection: McpServerConnection | undefined;
    // Not const: onChange may run inside the constructor, before the assignment (then it reads undefined).
    // eslint-disable-next-line prefer-const
    connection = new McpServerConnection({
      name, config: server, registry, logger: silentLogger(), connectTimeoutMs: server.connectTimeoutMs ?? config.mcp.connectTimeoutMs, callTimeoutMs: 1000,
      // One attempt: the first failure is the answer (the reconnect it schedules is cancelled by stop()).
      onChange: () => { const state = connection?.status().state; if (state === 'ready' || state === 'failed') settle(); },
    });
    connection.start();
    await settled;
    const status = connection.status();
    await connection.stop();
    return status;
  }));
}
