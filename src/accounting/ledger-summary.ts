import type { LedgerRecord } from './ledger-record.ts';

/** The LLM calls of one provider, model, call kind and channel, summed. */
export interface UsageGroup {
  providerId: string;
  modelId: string;
  kind: LedgerRecord['kind'];
  channel: LedgerRecord['channel'];
  calls: number;
  estimatedCalls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/** A {@link LedgerSummary} as stored in the snapshot. */
export interface LedgerSummaryState {
  groups: UsageGroup[];
  recent: LedgerRecord[];
}

/**
 * What the provider tracker and the metrics need of every record of the ledger, in a size that does not
 * grow with it: sums per provider, model, kind and channel, and the most recent records. It is kept
 * current as records are appended and saved in the ledger snapshot, so a start does not re-read history.
 */
export class LedgerSummary {
  private readonly groups = new Map<string, UsageGroup>();
  private recentRecords: LedgerRecord[] = [];
  private readonly recentLimit: number;

  constructor(recentLimit = 256) {
    this.recentLimit = recentLimit;
  }

  static from(state: LedgerSummaryState | undefined, recentLimit = 256): LedgerSummary {
    const summary = new LedgerSummary(recentLimit);
    for (const g of state?.groups ?? []) summary.addGroup(g);
    summary.recentRecords = (state?.recent ?? []).slice(-recentLimit);
    return summary;
  }

  add(record: LedgerRecord): void {
    this.addGroup({
      providerId: record.providerId, modelId: record.modelId, kind: record.kind, channel: record.channel, calls: 1,
      estimatedCalls: record.isEstimated ? 1 : 0, inputTokens: record.inputTokens, outputTokens: record.outputTokens,
      cacheReadTokens: record.cacheReadTokens, cacheWriteTokens: record.cacheWriteTokens,
    });
    this.recentRecords.push(record);
    if (this.recentRecords.length > this.recentLimit * 2) this.recentRecords = this.recentRecords.slice(-this.recentLimit);
  }

  /** Takes in a summary of records that all came before this one's. */
  absorbOlder(older: LedgerSummary): void {
    for (const g of older.groups.values()) this.addGroup(g);
    this.recentRecords = [...older.recent(), ...this.recentRecords].slice(-this.recentLimit);
  }

  groupList(): UsageGroup[] {
    return [...this.groups.values()].map((g) => ({ ...g }));
  }

  /** The most recent records, oldest first. */
  recent(): LedgerRecord[] {
    return this.recentRecords.slice(-this.recentLimit);
  }

  toJSON(): LedgerSummaryState {
    return { groups: this.groupList(), recent: this.recent() };
  }

  private addGroup(g: UsageGroup): void {
    const key = `${g.providerId}\u0000${g.modelId}\u0000${g.kind}\u0000${g.channel}`;
    const into = this.groups.get(key);
    if (!into) {
      this.groups.set(key, { ...g });
      return;
    }
    into.calls += g.calls;
    into.estimatedCalls += g.estimatedCalls;
    into.inputTokens += g.inputTokens;
    into.outputTokens += g.outputTokens;
    into.cacheReadTokens += g.cacheReadTokens;
    into.cacheWriteTokens += g.cacheWriteTokens;
  }
}
