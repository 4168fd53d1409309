import type { ChannelId } from '../core/message.ts';
import type { InputComponents, LlmCallEvent, LlmCallKind, ScheduledRunKind } from '../agent/turn-events.ts';

/**
 * One line of `<stateDir>/audit/turn-token-usage.jsonl`: one LLM call (SPEC §4). Exactly these fields, in
 * this order. `inputTokens` excludes cached prompt tokens (they are `cacheReadTokens` / `cacheWriteTokens`),
 * so the four counts add up to the call's total without double counting.
 */
export interface LedgerRecord {
  correlationId: string;
  sessionKey: string;
  sessionId: string;
  channel: ChannelId;
  agentId: string;
  providerId: string;
  modelId: string;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** SPEC §4's six components, and `images` when the request carried any (SPEC §15). */
  estimatedInputTokensByComponent: Omit<InputComponents, 'images'> & { images?: number };
  isEstimated: boolean;
  kind: LlmCallKind;
  /** ISO 8601, UTC. */
  timestamp: string;
  /** Present on the records of a spawned or messaged session's turns: the correlation id of the turn that started them. */
  parentCorrelationId?: string;
  /**
   * Present on the records of scheduled work (SPEC §17): `job` (with {@link LedgerRecord.jobId}) for a job's run,
   * `heartbeat` for a heartbeat's. `/usage` sums them apart (`jobs`, `heartbeat`).
   */
  run?: ScheduledRunKind;
  /** The job a `job` run was for. */
  jobId?: string;
  /** Names of the tools the model asked for in this call, when it asked for any. */
  toolCalls?: string[];
}

/** The ledger record of a finished LLM call. */
export function ledgerRecordOf(event: LlmCallEvent): LedgerRecord {
  const c = event.estimatedInputTokensByComponent;
  return {
    correlationId: event.correlationId,
    sessionKey: event.sessionKey,
    sessionId: event.sessionId,
    channel: event.channel,
    agentId: event.agentId,
    providerId: event.providerId,
    modelId: event.modelId,
    inputTokens: event.usage.inputTokens,
    outputTokens: event.usage.outputTokens,
    cacheReadTokens: event.usage.cacheReadTokens,
    cacheWriteTokens: event.usage.cacheWriteTokens,
    estimatedInputTokensByComponent: {
      system: c.system, bootstrap: c.bootstrap, tools: c.tools, history: c.history, toolResults: c.toolResults, userInput: c.userInput,
      ...(c.images ? { images: c.images } : {}),
    },
    isEstimated: event.isEstimated,
    kind: event.kind,
    timestamp: new Date(event.at).toISOString(),
    ...(event.parentCorrelationId ? { parentCorrelationId: event.parentCorrelationId } : {}),
    ...(event.run ? { run: event.run } : {}),
    ...(event.jobId ? { jobId: event.jobId } : {}),
    ...(event.toolCalls?.length ? { toolCalls: event.toolCalls } : {}),
  };
}

/** Input + output + cache read + cache write of a record. */
export function recordTotal(record: Pick<LedgerRecord, 'inputTokens' | 'outputTokens' | 'cacheReadTokens' | 'cacheWriteTokens'>): number {
  return record.inputTokens + record.outputTokens + record.cacheReadTokens + record.cacheWriteTokens;
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;

/** Parses one ledger line; undefined for a torn or foreign line. */
export function parseLedgerLine(line: string): LedgerRecord | undefined {
  if (!line.trim()) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  const r = value as Partial<LedgerRecord> | null;
  if (!r || typeof r !== 'object' || typeof r.sessionKey !== 'string' || typeof r.correlationId !== 'string' || typeof r.providerId !== 'string') return undefined;
  if (!isCount(r.inputTokens) || !isCount(r.outputTokens) || !isCount(r.cacheReadTokens) || !isCount(r.cacheWriteTokens)) return undefined;
  // The scheduled-run marks are optional: a foreign value is dropped, the record kept.
  if (r.run !== undefined && r.run !== 'job' && r.run !== 'heartbeat') delete r.run;
  if (r.jobId !== undefined && (typeof r.jobId !== 'string' || !r.jobId)) delete r.jobId;
  return r as LedgerRecord;
}

const SESSION_KEY = /"sessionKey":("(?:[^"\\]|\\.)*")/;
const KEY_MARK = Buffer.from('"sessionKey":"');

/** A record line's session key, read from the bytes (no whole-line decoding; JSON only when the key has escapes). */
export function sessionKeyOfLine(line: Buffer): string | undefined {
  const at = line.indexOf(KEY_MARK);
  if (at < 0) return undefined;
  const start = at + KEY_MARK.length;
  const end = line.indexOf(0x22, start);
  if (end < 0) return undefined;
  const raw = line.toString('utf8', start, end);
  if (!raw.includes('\\')) return raw;
  const quoted = SESSION_KEY.exec(line.toString('utf8'))?.[1];
  try {
    return quoted === undefined ? undefined : (JSON.parse(quoted) as string);
  } catch {
    return undefined;
  }
}
