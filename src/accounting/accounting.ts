import path from 'node:path';
import type { LlmCallEvent, TurnObserver } from '../agent/turn-events.ts';
import type { Logger } from '../core/logger.ts';
import { TokenLedger, type LedgerRotation } from './ledger.ts';
import { LedgerHistory } from './ledger-history.ts';
import { ledgerRecordOf, type LedgerRecord } from './ledger-record.ts';
import { GatewayMetrics, type MetricsSources } from './metrics.ts';
import { ProviderTracker, type ProviderUsage } from './provider-tracker.ts';
import { RuntimeTotals, type TokenTotals, type UsageReport } from './runtime-totals.ts';

/**
 * A shared ledger (cluster mode, `PgLedgerSink`): it takes the records instead of the local JSONL ledger, and the
 * figures derived from the ledger are read from it, so every replica answers the same.
 */
export interface LedgerStore {
  /** Queues a record; never blocks the turn. */
  append(record: LedgerRecord): void;
  flush(): Promise<void>;
  close(): Promise<void>;
  usage(): Promise<UsageReport>;
  /** Requests (calls that returned) and tokens per provider and model; retries and errors are not in the ledger. */
  providerUsage(): Promise<ProviderUsage[]>;
  /** Newest first. */
  recent(limit: number): Promise<LedgerRecord[]>;
  /** A session key's last `limit` records, oldest first. */
  timeline(sessionKey: string, limit: number): Promise<LedgerRecord[]>;
  keyTotals(sessionKey: string): Promise<TokenTotals & { sessions: number }>;
  sessionTotals(sessionKey: string, sessionId: string): Promise<TokenTotals>;
}

/** Options of {@link Accounting}. */
export interface AccountingOptions {
  stateDir: string;
  logger: Logger;
  /** Process start (epoch ms), the `since` of an empty ledger. */
  startedAt: number;
  metrics: MetricsSources;
  /** Recent calls kept in memory (default 256). */
  recentLimit?: number;
  /**
   * How long the figures derived from the ledger (`/usage`, `/metrics`, provider sums) wait for a history
   * still being read in the background before they are answered partial (default 1000 ms).
   */
  historyWaitMs?: number;
  /** Ledger rotation and archives (`ledger` in the config); default by size, 16 MiB, 365 days. */
  ledger?: LedgerRotation;
  /** Epoch ms, for rotation and retention (default `Date.now`). */
  now?: () => number;
  /**
   * Cluster mode: records go here instead of the JSONL ledger, and usage, provider sums, recent calls, timelines
   * and session totals are read from it. The Prometheus counters stay this process's own (never seeded).
   */
  ledgerStore?: LedgerStore;
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
  private readonly store?: LedgerStore;
  private readonly historyWaitMs: number;

  constructor(options: AccountingOptions) {
    this.logger = options.logger;
    this.store = options.ledgerStore;
    this.historyWaitMs = options.historyWaitMs ?? 1000;
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
    if (!this.store) await this.history.open();
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
    return this.store ? this.store.close() : this.history.close();
  }

  flush(): Promise<void> {
    return this.store ? this.store.flush() : this.ledger.flush();
  }

  /**
   * Whether the whole history is counted, after waiting for it at most `historyWaitMs`: a first start on a
   * big ledger without a snapshot reads it for seconds, and no request waits that long (a history that
   * could not be read counts as done: the totals start from here, as logged).
   */
  async counted(): Promise<boolean> {
    if (this.store) return true;
    let done = false;
    const settled = this.ready.then(() => { done = true; }, () => { done = true; });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([settled, new Promise<void>((resolve) => { timer = setTimeout(resolve, this.historyWaitMs); })]);
    clearTimeout(timer);
    return done;
  }

  /**
   * `GET /usage`: token totals, and per channel. While the history is still being read (past the bounded
   * wait, see {@link counted}) the figures so far, flagged `partial: true`.
   */
  async usage(): Promise<UsageReport & { partial?: true }> {
    if (this.store) return this.store.usage();
    const complete = await this.counted();
    const report = this.totals.snapshot();
    return complete ? report : { ...report, partial: true };
  }

  /**
   * `GET /metrics/providers`: requests, retries, errors and tokens per provider and model. In cluster mode the
   * requests and tokens are the cluster's (the ledger's), retries and errors this process's.
   */
  async providerUsage(): Promise<ProviderUsage[]> {
    if (!this.store) {
      await this.counted();
      return this.providers.usage();
    }
    const local = new Map(this.providers.usage().map((u) => [`${u.providerId}\u0000${u.modelId}`, u]));
    const merged = (await this.store.providerUsage()).map((u) => {
      const mine = local.get(`${u.providerId}\u0000${u.modelId}`);
      local.delete(`${u.providerId}\u0000${u.modelId}`);
      return mine ? { ...u, requests: u.requests + mine.errors, retries: mine.retries, errors: mine.errors } : u;
    });
    for (const mine of local.values()) {
      if (mine.errors || mine.retries) merged.push({ ...mine, requests: mine.errors, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });
    }
    return merged.sort((a, b) => a.providerId.localeCompare(b.providerId) || a.modelId.localeCompare(b.modelId));
  }

  /** The most recent LLM calls (ledger records), newest first. */
  async recentTurns(limit: number): Promise<LedgerRecord[]> {
    if (this.store) return this.store.recent(limit);
    await this.counted();
    return this.providers.recent(limit);
  }

  /** A session key's last `limit` ledger records, oldest first. */
  async timeline(sessionKey: string, limit: number): Promise<LedgerRecord[]> {
    if (this.store) return this.store.timeline(sessionKey, limit);
    // Newest first from the file's end, then oldest first for the timeline.
    const found = await this.ledger.readBackwards((r) => r.sessionKey === sessionKey, limit, { contains: `"sessionKey":${JSON.stringify(sessionKey)}`, sessionKey });
    return found.reverse();
  }

  /** Totals of a session key across its resets (`/usage` of a session). */
  async keyTotals(sessionKey: string): Promise<TokenTotals & { sessions: number }> {
    return this.store ? this.store.keyTotals(sessionKey) : this.totals.ofKey(sessionKey);
  }

  /** Totals of a key's current session id. */
  async sessionTotals(sessionKey: string, sessionId: string): Promise<TokenTotals> {
    return this.store ? this.store.sessionTotals(sessionKey, sessionId) : this.totals.ofSession(sessionKey, sessionId);
  }

  private onLlmCall(event: LlmCallEvent): void {
    // A failed call used no tokens and has no ledger record; it counts as an error.
    const record: LedgerRecord | undefined = event.error ? undefined : ledgerRecordOf(event);
    if (record && this.store) {
      this.store.append(record);
    } else if (record) {
      this.ledger.append(record);
      this.totals.add(record);
      this.history.added(record);
    }
    this.providers.record(event, record);
    this.metrics.llmCall(event, record);
  }
}
