import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { z } from 'zod';
import type { McpServerConfig } from '../../config/schema.ts';
import type { Logger } from '../../core/logger.ts';
import { ToolErrorResult, type ToolRegistry } from '../registry.ts';
import type { Tool } from '../tool.ts';
import { describeMcpResult, type McpCallResult } from './mcp-results.ts';

/**
 * Where a server stands (SPEC §11): `connecting` (the first attempt since start), `ready`, `failed` (waiting to
 * retry), `reconnecting` (a later attempt, after a failure or a lost connection); `stopped` at shutdown.
 */
export type McpState = 'connecting' | 'ready' | 'failed' | 'reconnecting' | 'stopped';

/** What `/status` shows of one server. */
export interface McpServerStatus {
  name: string;
  transport: 'stdio' | 'http';
  state: McpState;
  tools: number;
  /** Why it failed (the last error), when it did. */
  error?: string;
}

/** Options of {@link McpServerConnection}. */
export interface McpConnectionOptions {
  name: string;
  config: McpServerConfig;
  registry: ToolRegistry;
  logger: Logger;
  connectTimeoutMs: number;
  /** The longest a call may take (the registry's timeout cuts it first). */
  callTimeoutMs: number;
  /** First reconnect delay; doubles up to `maxReconnectMs`, with jitter. */
  reconnectBaseMs?: number;
  maxReconnectMs?: number;
  /** Called whenever the state or the tool list changes. */
  onChange?: () => void;
  /** How often a ready server is pinged, so a dead or restarted HTTP server is noticed without a call (default 30 s). */
  pingIntervalMs?: number;
  /** How long a server must stay ready before its backoff starts over (default 30 s): a crash loop keeps backing off. */
  stableAfterMs?: number;
  /** The clock of {@link stableAfterMs} (default `Date.now`). */
  now?: () => number;
}

/** Tool schemas over this size (JSON characters) are left out: one server cannot take over every request. */
const MAX_SCHEMA_CHARS = 32_000;
const MAX_DESCRIPTION = 1024;
const MAX_TOOL_PAGES = 20;

/**
 * One MCP server (stdio or Streamable HTTP) through the official SDK client: connects within a bound,
 * registers its tools as `<server>__<tool>` in group `mcp:<server>`, follows `tools/list_changed`, and when
 * the connection drops logs it once, removes the tools and reconnects with backoff. Calls carry the turn's
 * signal (the SDK sends the cancellation to the server).
 */
export class McpServerConnection {
  private readonly options: McpConnectionOptions;
  private state: McpState = 'connecting';
  private error?: string;
  private client?: Client;
  private toolCount = 0;
  private attempt = 0;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private generation = 0;
  private pinger?: NodeJS.Timeout;
  private checking = false;
  private readySince?: number;
  /** Set from the first failure until the server has stayed ready for `stableAfterMs`: one warning per outage. */
  private outage = false;
  private readyLogged = false;
  /** The attempt in progress, and how to cut it short (stop). */
  private connecting?: Promise<void>;
  private abortAttempt?: () => void;
  /** Settled when the attempt in progress ends (see {@link whenSettled}). */
  private settling?: { promise: Promise<void>; resolve(): void };

  constructor(options: McpConnectionOptions) {
    this.options = options;
  }

  get group(): string {
    return `mcp:${this.options.name}`;
  }

  status(): McpServerStatus {
    return {
      name: this.options.name, transport: 'url' in this.options.config ? 'http' : 'stdio', state: this.state, tools: this.toolCount,
      ...(this.error && this.state !== 'ready' ? { error: this.error } : {}),
    };
  }

  /** While an attempt is in progress (`connecting`, `reconnecting`): settles when it ends, ready or not. Otherwise undefined. */
  whenSettled(): Promise<void> | undefined {
    if (this.state !== 'connecting' && this.state !== 'reconnecting') return undefined;
    if (!this.settling) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => { resolve = r; });
      this.settling = { promise, resolve };
    }
    return this.settling.promise;
  }

  /** Connects in the background; never throws. */
  start(): void {
    this.attemptNow();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    this.setState('stopped');
    this.options.registry.unregisterGroup(this.group);
    // An attempt in progress is cut short, so a server that never answers is not left running until its bound.
    this.abortAttempt?.();
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => undefined);
  }

  private attemptNow(): void {
    this.connecting = this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const generation = ++this.generation;
    this.setState(generation === 1 ? 'connecting' : 'reconnecting');
    const client = new Client({ name: 'switchboard', version: '0.1.0' }, {
      // The SDK's own refresh reads only the first page: page through as the first list does.
      listChanged: { tools: { autoRefresh: false, onChanged: () => void this.refresh(generation) } },
    });
    const transport = this.transport();
    const timeout = this.deadline();
    this.abortAttempt = () => timeout.abort();
    try {
      await client.connect(transport, { signal: timeout.signal, timeout: this.options.connectTimeoutMs });
      const tools = await this.listTools(client, timeout.signal);
      timeout.clear();
      if (this.stopped || generation !== this.generation) { await client.close().catch(() => undefined); return; }
      this.client = client;
      client.onclose = () => this.lost(generation, 'the connection closed');
      // The Streamable HTTP client reports a broken stream or a failed request here, never through onclose.
      client.onerror = (error) => { if (isTransportError(error)) this.lost(generation, describe(error)); else void this.check(generation); };
      this.readySince = this.now();
      this.register(tools);
      this.setState('ready');
      this.startPinging(generation);
      // A server that crashes right after every initialize is logged ready once per outage, not once per cycle.
      if (!this.readyLogged) this.options.logger.info({ mcpServer: this.options.name, tools: this.toolCount }, 'MCP server ready');
      this.readyLogged = true;
    } catch (error) {
      timeout.clear();
      await client.close().catch(() => undefined);
      const reason = timeout.signal.aborted ? `timed out after ${this.options.connectTimeoutMs / 1000} s` : (error as Error).message;
      this.fail(generation, reason);
    } finally {
      this.abortAttempt = undefined;
    }
  }

  private transport(): Transport {
    const config = this.options.config;
    if ('url' in config) return new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers: config.headers } });
    const transport = new StdioClientTransport({
      command: config.command, args: config.args, env: { ...getDefaultEnvironment(), ...config.env }, ...(config.cwd ? { cwd: config.cwd } : {}), stderr: 'pipe',
    });
    // A server's stderr is its log: kept at debug level, never on our stdout.
    transport.stderr?.on('data', (chunk: Buffer) => this.options.logger.debug({ mcpServer: this.options.name, stderr: chunk.toString('utf8').slice(0, 2000) }, 'MCP server stderr'));
    return transport;
  }

  private async listTools(client: Client, signal: AbortSignal): Promise<McpToolInfo[]> {
    const tools: McpToolInfo[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_TOOL_PAGES; page++) {
      const result = await client.listTools(cursor ? { cursor } : {}, { signal, timeout: this.options.connectTimeoutMs });
      tools.push(...(result.tools as McpToolInfo[]));
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    return tools;
  }

  /** `tools/list_changed`: the whole list again, every page. */
  private async refresh(generation: number): Promise<void> {
    const client = this.client;
    if (!client || generation !== this.generation) return;
    try {
      const timeout = this.deadline();
      const tools = await this.listTools(client, timeout.signal).finally(() => timeout.clear());
      if (client === this.client && generation === this.generation && this.state === 'ready') this.register(tools);
    } catch (error) {
      if (isTransportError(error)) this.lost(generation, describe(error));
      else this.options.logger.warn({ mcpServer: this.options.name, err: error }, `MCP server ${this.options.name}: the changed tool list could not be read; the previous list stays`);
    }
  }

  /** The connection dropped (server exited, network): logged once, tools removed, reconnect scheduled. */
  private lost(generation: number, reason: string): void {
    if (this.stopped || generation !== this.generation || this.state !== 'ready') return;
    const client = this.client;
    this.client = undefined;
    clearInterval(this.pinger);
    if (client) {
      client.onclose = undefined;
      client.onerror = undefined;
      // Later: the call whose failed request told us (onerror comes first) ends with that error, not "Connection closed".
      setImmediate(() => void client.close().catch(() => undefined));
    }
    // Only a server that stayed up a while starts its backoff over.
    if (this.readySince !== undefined && this.now() - this.readySince >= (this.options.stableAfterMs ?? 30_000)) {
      this.attempt = 0;
      this.outage = false;
      this.readyLogged = false;
    }
    this.fail(generation, reason);
  }

  /** Pings a ready server; a ping the transport cannot deliver, or that times out, means the server is gone. */
  private async check(generation: number): Promise<void> {
    const client = this.client;
    if (!client || this.checking || generation !== this.generation || this.state !== 'ready') return;
    this.checking = true;
    try {
      await client.ping({ timeout: this.options.connectTimeoutMs });
    } catch (error) {
      if (!(error instanceof McpError) || error.code === Number(ErrorCode.RequestTimeout) || error.code === Number(ErrorCode.ConnectionClosed)) this.lost(generation, describe(error));
    } finally {
      this.checking = false;
    }
  }

  private startPinging(generation: number): void {
    clearInterval(this.pinger);
    this.pinger = setInterval(() => void this.check(generation), this.options.pingIntervalMs ?? 30_000);
    this.pinger.unref();
  }

  /**
   * A bound on connecting or listing, cleared once done: the SDK keeps its abort listener after a request is
   * answered, so an `AbortSignal.timeout` would later send `notifications/cancelled` for finished requests.
   */
  private deadline(): { signal: AbortSignal; clear(): void; abort(): void } {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error('timeout')), this.options.connectTimeoutMs);
    timer.unref();
    return { signal: controller.signal, clear: () => clearTimeout(timer), abort: () => { clearTimeout(timer); controller.abort(new Error('stopped')); } };
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private fail(generation: number, reason: string): void {
    if (this.stopped || generation !== this.generation) return;
    const first = !this.outage;
    this.outage = true;
    this.error = reason;
    this.options.registry.unregisterGroup(this.group);
    this.toolCount = 0;
    this.setState('failed');
    if (first) this.options.logger.warn({ mcpServer: this.options.name, reason }, `MCP server ${this.options.name} is unavailable (${reason}); its tools are left out and it is reconnected with backoff`);
    const base = this.options.reconnectBaseMs ?? 1000;
    const delay = Math.min(this.options.maxReconnectMs ?? 60_000, base * 2 ** this.attempt) * (0.8 + Math.random() * 0.4);
    this.options.logger.debug({ mcpServer: this.options.name, attempt: this.attempt + 1, delayMs: Math.round(delay) }, 'MCP server reconnect scheduled');
    this.attempt++;
    this.timer = setTimeout(() => this.attemptNow(), delay);
    this.timer.unref();
  }

  private register(tools: McpToolInfo[]): void {
    const registry = this.options.registry;
    registry.unregisterGroup(this.group);
    const taken = new Set(registry.names());
    let count = 0;
    for (const info of tools) {
      const tool = this.toTool(info, taken);
      if (!tool) continue;
      registry.register(tool);
      taken.add(tool.name);
      count++;
    }
    this.toolCount = count;
    this.options.onChange?.();
  }

  private toTool(info: McpToolInfo, taken: Set<string>): Tool | undefined {
    const parameters = objectSchema(info.inputSchema);
    if (JSON.stringify(parameters).length > MAX_SCHEMA_CHARS) {
      this.options.logger.warn({ mcpServer: this.options.name, tool: info.name }, 'MCP tool left out: its input schema is too large');
      return undefined;
    }
    const name = uniqueName(`${this.options.name}__${info.name}`, taken);
    return {
      name, group: this.group, jsonSchema: parameters,
      description: (info.description ?? info.title ?? `${info.name} (from MCP server ${this.options.name})`).slice(0, MAX_DESCRIPTION),
      schema: validatorOf(parameters),
      run: async (args, context) => {
        const client = this.client;
        if (!client) throw new Error(`the MCP server "${this.options.name}" is not connected (${this.error ?? 'reconnecting'}); try again later`);
        const generation = this.generation;
        let result: McpCallResult;
        try {
          result = await client.callTool({ name: info.name, arguments: args as Record<string, unknown> }, undefined, { signal: context.signal, timeout: this.options.callTimeoutMs }) as McpCallResult;
        } catch (error) {
          if (!context.signal.aborted && isTransportError(error)) this.lost(generation, describe(error));
          throw error;
        }
        const text = describeMcpResult(result);
        if (result.isError) throw new ToolErrorResult(text);
        return text;
      },
    };
  }

  private setState(state: McpState): void {
    this.state = state;
    if (state !== 'connecting' && state !== 'reconnecting' && this.settling) {
      this.settling.resolve();
      this.settling = undefined;
    }
    this.options.onChange?.();
  }
}

/**
 * A failure of the connection rather than an answer of the server: an HTTP error status (a restarted server
 * answers 404 to the old session), a refused or reset connection. An `McpError` is the server speaking.
 */
function isTransportError(error: unknown): boolean {
  if (error instanceof McpError) return error.code === Number(ErrorCode.ConnectionClosed);
  if (error instanceof StreamableHTTPError) return true;
  if (!(error instanceof Error)) return false;
  const code = (error.cause as { code?: unknown } | undefined)?.code ?? (error as { code?: unknown }).code;
  return (error instanceof TypeError && error.message === 'fetch failed')
    || (typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|UND_ERR_SOCKET|UND_ERR_CLOSED)$/.test(code));
}

function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = error instanceof Error ? (error.cause as { code?: unknown } | undefined)?.code : undefined;
  return typeof code === 'string' && !message.includes(code) ? `${message} (${code})` : message;
}

/** A tool as `tools/list` describes it. */
interface McpToolInfo {
  name: string;
  title?: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
}

/** The tool's input schema as a request can carry it: an object schema, without `$schema`. */
export function objectSchema(schema: Record<string, unknown> | undefined): Record<string, unknown> {
  const { $schema: _drop, ...rest } = schema ?? {};
  const properties = rest.properties && typeof rest.properties === 'object' && !Array.isArray(rest.properties) ? rest.properties : {};
  return { ...rest, type: 'object', properties };
}

/** OpenAI's function-name rule; a clash gets a numeric suffix. */
function uniqueName(wanted: string, taken: Set<string>): string {
  const base = wanted.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64);
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) {
    const candidate = `${base.slice(0, 64 - String(i).length - 1)}_${i}`;
    if (!taken.has(candidate)) return candidate;
  }
}

const ajv = new AjvJsonSchemaValidator();

/** Arguments are checked against the server's own JSON schema; a schema Ajv cannot compile checks only that they are an object. */
export function validatorOf(schema: Record<string, unknown>): z.ZodType<unknown> {
  let validate: ((input: unknown) => { valid: boolean; errorMessage?: string }) | undefined;
  try {
    validate = ajv.getValidator(schema);
  } catch {
    validate = undefined;
  }
  return z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
    const result = validate?.(value);
    if (result && !result.valid) ctx.addIssue({ code: 'custom', message: result.errorMessage ?? 'does not match the schema' });
  });
}
