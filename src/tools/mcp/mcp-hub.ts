import type { ResolvedConfig } from '../../config/resolved.ts';
import type { Logger } from '../../core/logger.ts';
import type { ToolRegistry } from '../registry.ts';
import { McpServerConnection, type McpServerStatus } from './mcp-server.ts';

/** Options of {@link McpHub}. */
export interface McpHubOptions {
  config: ResolvedConfig;
  registry: ToolRegistry;
  logger: Logger;
  /** First reconnect delay (default 1 s). */
  reconnectBaseMs?: number;
}

/**
 * Every configured MCP server (SPEC §11). Connecting never delays start-up: servers come up in the background,
 * and a turn whose tools would include a server still connecting waits for it (the registry's arrivals), at most
 * the server's connect timeout.
 */
export class McpHub {
  private readonly servers: McpServerConnection[];

  constructor(options: McpHubOptions) {
    const { config, registry } = options;
    this.servers = Object.entries(config.mcp.servers).filter(([, server]) => server.enabled).map(([name, server]) => {
      const connectTimeoutMs = server.connectTimeoutMs ?? config.mcp.connectTimeoutMs;
      const connection = new McpServerConnection({
        name, config: server, registry, logger: options.logger,
        connectTimeoutMs, callTimeoutMs: config.tools.timeoutSeconds * 1000 + 5000,
        reconnectBaseMs: options.reconnectBaseMs,
      });
      registry.arrivals.add({
        group: connection.group, toolPrefix: `${name}__`, label: `MCP server ${name}`, waitMs: connectTimeoutMs,
        arriving: () => connection.whenSettled(),
        missing: () => { const s = connection.status(); return s.state === 'ready' ? undefined : s.error ?? s.state; },
      });
      return connection;
    });
  }

  start(): void {
    for (const server of this.servers) server.start();
  }

  status(): McpServerStatus[] {
    return this.servers.map((s) => s.status());
  }

  async stop(): Promise<void> {
    await Promise.allSettled(this.servers.map((s) => s.stop()));
  }
}

export type { McpServerStatus } from './mcp-server.ts';
