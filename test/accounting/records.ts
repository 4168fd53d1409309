import type { LlmCallEvent } from '../../src/agent/turn-events.ts';
import { ledgerRecordOf, type LedgerRecord } from '../../src/accounting/ledger-record.ts';

/** An LLM call event with sensible defaults. */
export function llmCall(over: Partial<LlmCallEvent> = {}): LlmCallEvent {
  return {
    correlationId: 'corr-1', sessionKey: 'agent:main:main', sessionId: 'sid-1', channel: 'telegram', agentId: 'main',
    kind: 'turn', providerId: 'default', modelId: 'gpt-test',
    usage: { inputTokens: 100, outputTokens: 20, cacheReadTokens: 30, cacheWriteTokens: 5 },
    isEstimated: false,
    estimatedInputTokensByComponent: { system: 50, bootstrap: 10, tools: 5, history: 30, toolResults: 0, userInput: 40 },
    retries: 0, durationMs: 120, at: Date.UTC(2025, 0, 2, 3, 4, 5), ...over,
  };
}

export function record(over: Partial<LlmCallEvent> = {}): LedgerRecord {
  return ledgerRecordOf(llmCall(over));
}

/** The field names of a ledger record, as SPEC §4 lists them. */
export const SPEC_FIELDS = [
  'correlationId', 'sessionKey', 'sessionId', 'channel', 'agentId', 'providerId', 'modelId', 'inputTokens', 'outputTokens',
  'cacheReadTokens', 'cacheWriteTokens', 'estimatedInputTokensByComponent', 'isEstimated', 'kind', 'timestamp',
];
export const COMPONENT_FIELDS = ['system', 'bootstrap', 'tools', 'history', 'toolResults', 'userInput'];
