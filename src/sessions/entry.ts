import type { ChannelId, ChatType, DeliveryTarget } from '../core/message.ts';

/** Lifecycle state of a session (SPEC §4). */
export type SessionState = 'active' | 'paused' | 'expired';

/** What the session's agent is doing (SPEC §4). */
export type RunState = 'idle' | 'running' | 'continuing' | 'paused' | 'blocked' | 'budget-limited' | 'completed' | 'failed';

/** Per-session settings changed by chat commands. */
export interface SessionOverrides {
  model?: string;
  reasoningEffort?: string;
  systemPrompt?: string;
  toolPreset?: string;
  /** IANA zone for this session's daily reset (`/timezone`). */
  timezone?: string;
}

/** Where a run stands, persisted after every tool result (SPEC §11). */
export interface RunCheckpoint {
  goal?: string;
  /** Batch of the current goal (or of the current turn), from 1. */
  batch: number;
  /** LLM calls made in the current batch. */
  iteration: number;
  /** The last transcript entry the run wrote. */
  lastEntryId?: string;
  /** The turn that wrote it. */
  correlationId: string;
  /** Tool calls made for the goal so far (all batches). */
  toolCalls?: number;
  /** Input + output tokens spent on the goal so far (all batches). */
  tokens?: number;
  /** When work on the goal began (epoch ms). */
  startedAt?: number;
}

/** Token totals of a session (all of its turns). */
export interface SessionTokens {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

/** The persisted record of one session key (SPEC §4). Times are epoch milliseconds. */
export interface SessionEntry {
  key: string;
  /** UUID of the key's current transcript. */
  sessionId: string;
  agentId: string;
  channel: ChannelId;
  accountId: string;
  chatType: ChatType;
  peerId?: string;
  groupId?: string;
  threadId?: string;
  parentKey?: string;
  displayName?: string;
  /** Discord guild / Slack team of a channel session: what guild/team bindings match (SPEC §12). */
  containerIds?: string[];
  createdAt: number;
  updatedAt: number;
  state: SessionState;
  runState: RunState;
  overrides: SessionOverrides;
  tokens: SessionTokens;
  /** Token totals of the current session id (a reset starts them over); the session budget counts these. */
  sessionTokens?: SessionTokens;
  /** Tokens of the last request's context (what the model saw). */
  contextTokens: number;
  compactionCount: number;
  lastResetReason?: 'daily' | 'idle' | 'manual' | 'admin';
  /** When the current session id began. */
  sessionStartedAt: number;
  /** Number of messages in the current transcript. */
  messageCount: number;
  /** Time of the last LLM request (pruning's cache TTL counts from it). */
  lastRequestAt?: number;
  /** Where the last reply went, so background work and replays can reach the chat. */
  deliveryTarget?: DeliveryTarget;
  /** Standing goal (`/goal`): background batches continue toward it. */
  goal?: string;
  /** The chat where the goal was set; the goal's answers go there. */
  goalTarget?: DeliveryTarget;
  checkpoint?: RunCheckpoint;
  /** How many `sessions_spawn` steps away from a chat session this one is (0 for chats). */
  spawnDepth?: number;
}

export function emptyTokens(): SessionTokens {
  return { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
}

export function totalTokens(tokens: SessionTokens): number {
  return tokens.input + tokens.output + tokens.cacheRead + tokens.cacheWrite;
}
