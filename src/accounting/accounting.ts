import path from 'node:path';
import type { LlmCallEvent, TurnObserver } from '../agent/turn-events.ts';
import type { Logger } from '../core/logger.ts';
import { TokenLedger, type LedgerRotation } from './ledger.ts';
import { LedgerHistory } from './ledger-history.ts';
import { ledgerRecordOf, type LedgerRecord } from './ledger-record.ts';
import { GatewayMetrics, type MetricsSources } from './metrics.ts';
import { ProviderTracker } from './provider-tracker.ts';
import { RuntimeTotals } from './runtime-totals.ts';

/** Options of {@link Accounting}. */
export interface AccountingOptions {
  stateDir: string;
  logger: Logger;
  /** Process start (epoch ms), the `since` of an empty ledger. */
  startedAt: number;
  metrics: MetricsSources;
  /** Recent calls kept in memory (default 256). */
  recentLimit?: number;
  /** Ledger rotation and archives (`ledger` in the config); default by size, 16 MiB, 365 days. */
  ledger?: LedgerRotation;
  /** Epoch ms, for rotation and retention (default `Date.now`). */
  now?: () => number;
}

/** Where the ledger lives under a state folder (SPEC §4). */
export function ledgerPath(stateDir: string): string {
  return path.join(stateDir, 'audit', 'turn-token-usage.jsonl');
}

/**
 * Token accounting of one gateway: a turn observer that feeds every LLM call to the ledger, the runtime
 * totals, the provider tracker and the metrics. The runtime never calls it; it subscribes to turn events.
 * Session totals live on the session entry and are kept by the runtime.
 */
export class Accounting {
  readonly ledger: TokenLedger;
  readonly providers: ProviderTracker;
  readonly totals: RuntimeTotals;
  readonly metrics: GatewayMetrics;
  /** Snapshot and read-back of the ledger's history. */
  readonly history: LedgerHistory;
  private readonly logger: Logger;

  constructor(options: AccountingOptions) {
    this.logger = options.logger;
    this.ledger = new TokenLedger({
      file: ledgerPath(options.stateDir), logger: options.logger, rotation: options.ledger, now: options.now,
      onSettled: () => this.history.settled(),
    });
    this.providers = new ProviderTracker({ recentLimit: options.recentLimit });
    this.totals = new RuntimeTotals(options.startedAt);
    this.metrics = new GatewayMetrics(options.metrics);
    this.history = new LedgerHistory({
      ledger: this.ledger, totals: this.totals, providers: this.providers, metrics: this.metrics, logger: options.logger,
      startedAt: options.startedAt, recentLimit: options.recentLimit,
    });
  }

  /**
   * Learns the ledger's history (totals, recent calls, token counters), so they survive restarts: from its
   * snapshot and the records after it; a long history without a usable snapshot is read in the background
   * ({@link ready}), so start-up time does not grow with history.
   */
  async open(): Promise<void> {
    await this.history.open();
  }

  /** Settles once the whole history is counted (at once, unless it is read in the background). */
  get ready(): Promise<void> {
    return this.history.ready;
  }

  /** Subscribe this to `runtime.events`. */
  readonly observer: TurnObserver = {
    onLlmCall: (event) => this.onLlmCall(event),
    onTurnEnd: (event) => this.metrics.turnEnd(event),
    onToolCall: (event) => this.metrics.toolCall(event),
    onBatchEnd: (event) => this.metrics.batchEnd(event),
    onRefusal: (event) => this.metrics.refusal(event),
  };

  /** Writes the queued ledger records, saves the snapshot and closes the ledger (shutdown). */
  close(): Promise<void> {
    return this.history.close();
  }

  flush(): Promise<void> {
    return this.ledger.flush();
  }

  private onLlmCall(event: LlmCallEvent): void {
    // A failed call used no tokens and has no ledger record; it counts as an error.
    const record: LedgerRecord | undefined = event.error ? undefined : ledgerRecordOf(event);
    if (record) {
      this.ledger.append(record);
      this.totals.add(record);
      this.history.added(record);
    }
    this.providers.record(event, record);
    this.metrics.llmCall(event, record);
  }
}
