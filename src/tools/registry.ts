import { z } from 'zod';
import type { ToolPolicy } from '../config/schema.ts';
import type { ToolSchema } from '../providers/types.ts';
import type { ToolCall } from '../sessions/transcript.ts';
import { enabledToolNames } from './presets.ts';
import { ToolArrivals } from './tool-arrivals.ts';
import { realTimeout, type TimeoutHandle } from './timeout.ts';
import type { Tool, ToolAnswer, ToolContext, ToolOutcome } from './tool.ts';

/** Arguments longer than this are refused before parsing (a model can emit anything). */
export const MAX_ARGUMENT_CHARS = 256 * 1024;

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Options of {@link ToolRegistry}. */
export interface ToolRegistryOptions {
  /** `tools.timeoutSeconds`, in milliseconds. */
  timeoutMs: number;
  /** Results longer than this are cut, with a note saying how much was cut. */
  maxResultChars: number;
  /** Makes the timeout of one call (default: a real timer). */
  timeout?: (ms: number) => TimeoutHandle;
  /** Makes the bound of a turn's wait for tools still connecting (default: a real timer). */
  arrivalTimeout?: (ms: number) => TimeoutHandle;
}

interface Registered {
  tool: Tool;
  schema: ToolSchema;
}

/** Everything a call needs but its arguments and id. */
export type CallContext = Omit<ToolContext, 'toolCallId'>;

/**
 * Every tool the gateway knows, their JSON schemas (derived once from zod), the preset/allow/deny
 * resolution per session, and the guarded execution of one call: arguments parsed and validated, the
 * call bounded in time and by the turn's signal, and every failure turned into a result the model reads.
 */
export class ToolRegistry {
  private readonly tools = new Map<string, Registered>();
  private readonly enabledCache = new Map<string, ToolSchema[]>();
  private readonly options: ToolRegistryOptions;
  /** Groups still connecting (MCP servers), which a turn waits for before its first request. */
  readonly arrivals: ToolArrivals;

  constructor(options: ToolRegistryOptions) {
    this.options = options;
    this.arrivals = new ToolArrivals({ timeout: options.arrivalTimeout ?? realTimeout });
  }

  register(tool: Tool): void {
    if (!TOOL_NAME.test(tool.name)) throw new Error(`Tool name "${tool.name}" must match ${TOOL_NAME.source}.`);
    if (this.tools.has(tool.name)) throw new Error(`A tool named "${tool.name}" is already registered.`);
    this.tools.set(tool.name, { tool, schema: { name: tool.name, description: tool.description, parameters: tool.jsonSchema ?? jsonSchemaOf(tool.schema) } });
    this.enabledCache.clear();
  }

  /** Removes every tool of a group (an MCP server that went away). */
  unregisterGroup(group: string): void {
    for (const [name, r] of this.tools) if (r.tool.group === group) this.tools.delete(name);
    this.enabledCache.clear();
  }

  get(name: string): Tool | undefined {
    return this.tools.get(name)?.tool;
  }

  names(): string[] {
    return [...this.tools.keys()];
  }

  /** The schemas a policy enables, in registration order; the same array object while nothing changes. */
  schemasFor(policy: ToolPolicy): ToolSchema[] {
    const cacheKey = `${policy.preset}\u0000${policy.allow.join(',')}\u0000${policy.deny.join(',')}`;
    let schemas = this.enabledCache.get(cacheKey);
    if (!schemas) {
      const names = enabledToolNames(policy, { names: this.names(), groupOf: (n) => this.tools.get(n)?.tool.group });
      schemas = names.map((n) => (this.tools.get(n) as Registered).schema);
      this.enabledCache.set(cacheKey, schemas);
    }
    return schemas;
  }

  /** Runs one call. Only a stopped turn (its signal aborted) throws; everything else becomes a result. */
  async execute(call: ToolCall, enabled: readonly ToolSchema[], context: CallContext): Promise<ToolOutcome> {
    const registered = this.tools.get(call.name);
    if (!registered) {
      return { outcome: 'unknown_tool', content: `Error: there is no tool named "${clip(call.name, 80)}". Available tools: ${enabled.map((s) => s.name).join(', ') || 'none'}.` };
    }
    // By name: an MCP refresh or reconnect between the response and the call registers new schema objects.
    if (!enabled.some((s) => s.name === call.name)) {
      return { outcome: 'not_enabled', content: `Error: the tool "${call.name}" is not enabled in this session (see /tools).` };
    }
    const parsed = parseArguments(registered.tool, call.arguments);
    if (!parsed.ok) return { outcome: 'invalid_arguments', content: parsed.message };
    const limitMs = Math.max(this.options.timeoutMs, registered.tool.maxDurationMs?.(parsed.value) ?? 0);
    const timeout = (this.options.timeout ?? realTimeout)(limitMs);
    const signal = AbortSignal.any([context.signal, timeout.signal]);
    try {
      const answer = await untilAborted(registered.tool.run(parsed.value, { ...context, signal, toolCallId: call.id }), signal);
      return { outcome: 'ok', ...this.cut(format(answer)) };
    } catch (error) {
      if (context.signal.aborted) throw error;
      if (error instanceof ToolErrorResult) return { outcome: 'error', ...this.cut(error.message) };
      if (timeout.signal.aborted) {
        return { outcome: 'timeout', content: `Error: the tool "${call.name}" did not finish within ${limitMs / 1000} s and was cancelled.` };
      }
      const message = error instanceof Error ? error.message : String(error);
      return { outcome: 'error', content: `Error: the tool "${call.name}" failed: ${clip(message, 2000)}` };
    } finally {
      timeout.clear();
    }
  }

  private cut(content: string): { content: string; cutChars?: number } {
    const max = this.options.maxResultChars;
    if (content.length <= max) return { content };
    let end = max;
    const code = content.charCodeAt(end - 1);
    if (code >= 0xd800 && code <= 0xdbff) end--;
    const cutChars = content.length - end;
    return { content: `${content.slice(0, end)}\n[… result cut: ${cutChars} more characters not shown]`, cutChars };
  }
}

/**
 * A tool's answer that reports a failure in its own words (an MCP result marked `isError`): the model reads
 * the message as it is, and the call counts as outcome `error`.
 */
export class ToolErrorResult extends Error {
  readonly code = 'TOOL_ERROR_RESULT';
}

/** A tool's JSON schema for the request, from its zod schema (input side: defaults are optional). */
export function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _drop, ...json } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return json;
}

function parseArguments(tool: Tool, raw: string): { ok: true; value: unknown } | { ok: false; message: string } {
  const fix = `Fix the arguments and call ${tool.name} again.`;
  if (raw.length > MAX_ARGUMENT_CHARS) return { ok: false, message: `Error: the arguments of ${tool.name} are ${raw.length} characters long; at most ${MAX_ARGUMENT_CHARS} are accepted.` };
  let value: unknown;
  try {
    value = raw.trim() === '' ? {} : JSON.parse(raw);
  } catch (error) {
    return { ok: false, message: `Error: the arguments of ${tool.name} are not valid JSON (${(error as Error).message}). ${fix}` };
  }
  const result = tool.schema.safeParse(value);
  if (result.success) return { ok: true, value: result.data };
  const problems = result.error.issues.slice(0, 5).map((i) => `${i.path.length ? i.path.join('.') : '(arguments)'}: ${i.message}`);
  return { ok: false, message: `Error: invalid arguments for ${tool.name}: ${problems.join('; ')}. ${fix}` };
}

function format(answer: ToolAnswer): string {
  return typeof answer === 'string' ? answer : JSON.stringify(answer);
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** Settles with `work`, or rejects as soon as `signal` aborts (a tool that ignores its signal cannot hang the turn). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason ?? new Error('aborted'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => { signal.removeEventListener('abort', onAbort); resolve(v); },
      (e: unknown) => { signal.removeEventListener('abort', onAbort); reject(e); },
    );
  });
}
