import type { z } from 'zod';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage, OutboundFile } from '../core/message.ts';
import type { SessionEntry } from '../sessions/entry.ts';

/** What a tool gets besides its arguments: who calls it, and a signal that `/stop`, shutdown or the timeout abort. */
export interface ToolContext {
  /** The calling session's live entry (read it; the runtime persists it). */
  entry: SessionEntry;
  /** The inbound message of the turn that called the tool. */
  message: InboundMessage;
  correlationId: string;
  /** The id the model gave this call. */
  toolCallId: string;
  signal: AbortSignal;
  logger: Logger;
  /** The session's agent workspace (memory notes live under it). */
  workspace: string;
  /** The session's IANA time zone. */
  timezone: string;
  now(): number;
  /**
   * Sends a file to the chat the turn answers, as a native upload (SPEC §15 `send_file`); resolves once the
   * platform took it. Absent when the turn has no chat to send to (an API call, a background run with no target).
   */
  sendFile?(file: OutboundFile, caption?: string): Promise<void>;
  /** Set when the call is part of the silent memory flush before a compaction. */
  purpose?: 'memory-flush';
  /**
   * Runs `work` with the caller's concurrency slot given back, and takes a slot again before returning,
   * so a turn that waits on another session never holds a slot that session needs.
   */
  lendSlot<T>(work: () => Promise<T>): Promise<T>;
}

/** A tool's answer: text for the model, or a JSON-able value (sent as JSON). */
export type ToolAnswer = string | Record<string, unknown> | unknown[];

/**
 * A tool the model may call: a name, a description, a zod schema (the one source of its JSON schema and of
 * argument validation) and a function. Define tools with {@link defineTool} so arguments are typed.
 */
export interface Tool<Args = unknown> {
  /** `^[a-zA-Z0-9_-]{1,64}$` (OpenAI's rule for function names). */
  name: string;
  description: string;
  /** Group it belongs to, e.g. `group:sessions`, `mcp:github`. */
  group: string;
  schema: z.ZodType<Args>;
  /** A ready JSON schema, for tools that bring their own (MCP); otherwise derived from `schema`. */
  jsonSchema?: Record<string, unknown>;
  /** A longer bound than `tools.timeoutSeconds` for calls that wait by design (`sessions_yield`). */
  maxDurationMs?(args: Args): number;
  run(args: Args, context: ToolContext): Promise<ToolAnswer>;
}

/** Defines a tool with its argument type inferred from the schema. */
export function defineTool<S extends z.ZodType>(tool: Omit<Tool<z.output<S>>, 'schema'> & { schema: S }): Tool<unknown> {
  return tool;
}

/** How one call ended (the `outcome` label of the tool-call metric). */
export type ToolOutcomeKind = 'ok' | 'error' | 'invalid_arguments' | 'timeout' | 'unknown_tool' | 'not_enabled' | 'interrupted';

/** The result of one call, as it goes into the transcript. */
export interface ToolOutcome {
  content: string;
  outcome: ToolOutcomeKind;
  /** Characters cut from a result over `tools.maxResultChars`. */
  cutChars?: number;
}
