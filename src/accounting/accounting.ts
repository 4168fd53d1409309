import path from 'node:path';
import type { LlmCallEvent, TurnObserver } from '../agent/turn-events.ts';
import type { Logger } from '../core/logger.ts';
import { TokenLedger } from './ledger.ts';
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
  private readonly logger: Logger;

  constructor(options: AccountingOptions) {
    this.logger = options.logger;
    this.ledger = new TokenLedger({ file: ledgerPath(options.stateDir), logger: options.logger });
    this.providers = new ProviderTracker({ recentLimit: options.recentLimit });
    this.totals = new RuntimeTotals(options.startedAt);
    this.metrics = new GatewayMetrics(options.metrics);
  }

  /** Reads the ledger back (totals, recent calls, token counters), so they survive restarts. */
  async open(): Promise<void> {
    await this.ledger.open();
    const started = Date.now();
    const count = await this.ledger.scan((record) => {
      this.totals.add(record);
      this.providers.seed(record);
      this.metrics.seed(record);
    });
    if (count) this.logger.debug({ records: count, ms: Date.now() - started }, 'token ledger read back');
  }

  /** Subscribe this to `runtime.events`. */
  readonly observer: TurnObserver = {
    onLlmCall: (event) => this.onLlmCall(event),
    onTurnEnd: (event) => this.metrics.turnEnd(event),
    onToolCall: (event) => this.metrics.toolCall(event),
    onBatchEnd: (event) => this.metrics.batchEnd(event),
  };

  /** Writes every queued ledger record (shutdown). */
  /** Writes the queued ledger records and closes the ledger (shutdown). */
  close(): Promise<void> {
    return this.ledger.close();
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
    }
    this.providers.record(event, record);
    this.metrics.llmCall(event, record);
  }
}
