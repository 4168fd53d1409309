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

/** Every configured MCP server (SPEC §11). Connecting never delays start-up: servers come up in the background. */
export class McpHub {
  private readonly servers: McpServerConnection[];

  constructor(options: McpHubOptions) {
    const { config } = options;
    this.servers = Object.entries(config.mcp.servers).filter(([, server]) => server.enabled).map(([name, server]) => new McpServerConnection({
      name, config: server, registry: options.registry, logger: options.logger,
      connectTimeoutMs: server.connectTimeoutMs ?? config.mcp.connectTimeoutMs, callTimeoutMs: config.tools.timeoutSeconds * 1000 + 5000,
      reconnectBaseMs: options.reconnectBaseMs,
    }));
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
