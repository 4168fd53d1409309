import type { LlmCallEvent } from '../agent/turn-events.ts';
import type { LedgerRecord } from './ledger-record.ts';
import type { UsageGroup } from './ledger-summary.ts';

/** Usage of one provider/model pair (`GET /metrics/providers`, SPEC §7). */
export interface ProviderUsage {
  providerId: string;
  modelId: string;
  requests: number;
  retries: number;
  errors: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/** The last failure of a provider, for `/status`. */
export interface ProviderFailure {
  code: string;
  modelId: string;
  at: string;
}

/**
 * Requests, retries, errors and tokens per provider and model, plus the most recent LLM calls (ledger
 * records) in memory. Tokens and requests of earlier runs come from the ledger ({@link seed}); retries and
 * errors are not in the ledger and count from the process start.
 */
export class ProviderTracker {
  private readonly byModel = new Map<string, ProviderUsage>();
  private readonly recentCalls: LedgerRecord[] = [];
  private readonly lastFailure = new Map<string, ProviderFailure>();
  private readonly recentLimit: number;

  constructor(options: { recentLimit?: number } = {}) {
    this.recentLimit = options.recentLimit ?? 256;
  }

  /** Counts a record read back from the ledger at start. */
  seed(record: LedgerRecord): void {
    this.addTokens(this.slot(record.providerId, record.modelId), record);
    this.remember(record);
  }

  /** Counts the calls of a ledger summary group at start (records summed, see `LedgerSummary`). */
  seedGroup(group: Pick<UsageGroup, 'providerId' | 'modelId' | 'calls' | 'inputTokens' | 'outputTokens' | 'cacheReadTokens' | 'cacheWriteTokens'>): void {
    const slot = this.slot(group.providerId, group.modelId);
    slot.requests += group.calls;
    slot.inputTokens += group.inputTokens;
    slot.outputTokens += group.outputTokens;
    slot.cacheReadTokens += group.cacheReadTokens;
    slot.cacheWriteTokens += group.cacheWriteTokens;
  }

  /** Puts records that came before every one remembered so far at the start of the recent list. */
  seedOlderRecent(records: readonly LedgerRecord[]): void {
    this.recentCalls.unshift(...records);
    if (this.recentCalls.length > this.recentLimit) this.recentCalls.splice(0, this.recentCalls.length - this.recentLimit);
  }

  /** Counts one LLM call as it happens; `record` is its ledger record when it succeeded. */
  record(event: LlmCallEvent, record: LedgerRecord | undefined): void {
    const slot = this.slot(event.providerId, event.modelId);
    slot.retries += event.retries;
    if (event.error) {
      slot.requests++;
      slot.errors++;
      this.lastFailure.set(event.providerId, { code: event.error, modelId: event.modelId, at: new Date(event.at).toISOString() });
      return;
    }
    if (record) {
      this.addTokens(slot, record);
      this.remember(record);
    }
  }

  /** Every provider/model pair seen, sorted. */
  usage(): ProviderUsage[] {
    return [...this.byModel.values()].map((u) => ({ ...u }))
      .sort((a, b) => a.providerId.localeCompare(b.providerId) || a.modelId.localeCompare(b.modelId));
  }

  /** The usage of one provider, all of its models summed. */
  providerTotals(providerId: string): Omit<ProviderUsage, 'modelId'> & { lastError?: ProviderFailure } {
    const total = { providerId, requests: 0, retries: 0, errors: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    for (const u of this.byModel.values()) {
      if (u.providerId !== providerId) continue;
      total.requests += u.requests;
      total.retries += u.retries;
      total.errors += u.errors;
      total.inputTokens += u.inputTokens;
      total.outputTokens += u.outputTokens;
      total.cacheReadTokens += u.cacheReadTokens;
      total.cacheWriteTokens += u.cacheWriteTokens;
    }
    const lastError = this.lastFailure.get(providerId);
    return lastError ? { ...total, lastError } : total;
  }

  /** The most recent LLM calls, newest first. */
  recent(limit = this.recentLimit): LedgerRecord[] {
    return limit > 0 ? this.recentCalls.slice(-limit).reverse() : [];
  }

  private slot(providerId: string, modelId: string): ProviderUsage {
    const key = `${providerId}\u0000${modelId}`;
    let slot = this.byModel.get(key);
    if (!slot) {
      slot = { providerId, modelId, requests: 0, retries: 0, errors: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
      this.byModel.set(key, slot);
    }
    return slot;
  }

  private addTokens(slot: ProviderUsage, record: LedgerRecord): void {
    slot.requests++;
    slot.inputTokens += record.inputTokens;
    slot.outputTokens += record.outputTokens;
    slot.cacheReadTokens += record.cacheReadTokens;
    slot.cacheWriteTokens += record.cacheWriteTokens;
  }

  private remember(record: LedgerRecord): void {
    this.recentCalls.push(record);
    if (this.recentCalls.length > this.recentLimit) this.recentCalls.splice(0, this.recentCalls.length - this.recentLimit);
  }
}
