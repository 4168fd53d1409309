import type { LlmCallEvent } from '../../src/agent/turn-events.ts';
import type { LedgerRecord } from '../../src/accounting/ledger-record.ts';

/** An LLM call event with sensible defaults. */
export function llmCall(over: Partial<LlmCallEvent> = {}): LlmCallEvent {
  return {
    correlationId: 'corr-1', sessionKey: 'agent:main:main', sessionId: 'sid-1', channel: 'telegram', agentId: 'main',
    kind: 'turn', providerId: 'default', modelId: 'gpt-test',
    usage: { inputTokens: 100, outputTokens: 20, cacheReadTokens: 30, cacheWriteTokens: 5 },
    isEstimated: false,
    estimatedInputTokensByComponent: { system: 50, bootstrap: 10, tools: 5, history: 30, toolResults: 0, userInput: 40, images: 0 },
    retries: 0, durationMs: 120, at: Date.UTC(2025, 0, 2, 3, 4, 5), ...over,
  };
}

/**
 * The ledger record of `llmCall(over)`, written out by hand (not with the production mapper, so that tests
 * reading records back do not share its mistakes; `ledger-record.test.ts` checks the mapper against literals).
 */
export function record(over: Partial<LlmCallEvent> = {}): LedgerRecord {
  const e = llmCall(over);
  const c = e.estimatedInputTokensByComponent;
  return {
    correlationId: e.correlationId, sessionKey: e.sessionKey, sessionId: e.sessionId, channel: e.channel, agentId: e.agentId,
    providerId: e.providerId, modelId: e.modelId,
    inputTokens: e.usage.inputTokens, outputTokens: e.usage.outputTokens, cacheReadTokens: e.usage.cacheReadTokens, cacheWriteTokens: e.usage.cacheWriteTokens,
    estimatedInputTokensByComponent: {
      system: c.system, bootstrap: c.bootstrap, tools: c.tools, history: c.history, toolResults: c.toolResults, userInput: c.userInput, ...(c.images ? { images: c.images } : {}),
    },
    isEstimated: e.isEstimated, kind: e.kind, timestamp: new Date(e.at).toISOString(),
    ...(e.parentCorrelationId ? { parentCorrelationId: e.parentCorrelationId } : {}),
    ...(e.toolCalls?.length ? { toolCalls: e.toolCalls } : {}),
  };
}

/** The field names of a ledger record, as SPEC §4 lists them. */
export const SPEC_FIELDS = [
  'correlationId', 'sessionKey', 'sessionId', 'channel', 'agentId', 'providerId', 'modelId', 'inputTokens', 'outputTokens',
  'cacheReadTokens', 'cacheWriteTokens', 'estimatedInputTokensByComponent', 'isEstimated', 'kind', 'timestamp',
];
export const COMPONENT_FIELDS = ['system', 'bootstrap', 'tools', 'history', 'toolResults', 'userInput'];
