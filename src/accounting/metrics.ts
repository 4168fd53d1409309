import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BatchEndEvent, LlmCallEvent, RefusalEvent, ToolCallEvent, TurnEndEvent } from '../agent/turn-events.ts';
import type { LedgerRecord } from './ledger-record.ts';
import type { UsageGroup } from './ledger-summary.ts';

/** Live figures the metrics read when scraped. */
export interface MetricsSources {
  activeSessions(): number;
  /** Sessions evicted from memory since start (`SessionManager.evictionCount`). */
  evictions(): number;
  /** Messages waiting on all lanes. */
  queueDepth(): number;
  runningTurns(): number;
  /** Gateway intake counters (accepted, duplicates, blocked, skipped, failed). */
  messages(): Record<string, number>;
  /** Replies given up on after the channel's retries, by `channel/account` (SPEC §16). */
  repliesFailed?(): Record<string, number>;
  /** Scheduled job runs since start, by outcome (`delivered`, `silent`, `failed`, `undeliverable`, `budget`; SPEC §17). */
  jobRuns?(): Record<string, number>;
  /** Failovers since start by (from provider, to provider, code), and the keys cooling down now (SPEC §18). */
  failovers?(): { counts: { from: string; to: string; code: string; count: number }[]; coolingDown: number };
  /**
   * Cluster mode: lane takeovers, lease losses, reruns and duplicate-reply windows hit by this replica;
   * `channelLeaseLosses`: channel leases (Telegram poller, Discord shards) it lost with their connection.
   */
  cluster?(): { takeovers: number; leaseLosses: number; reruns: number; duplicateWindows: number; channelLeaseLosses?: number };
}

const TOKEN_TYPES = [
  ['input', 'inputTokens'], ['output', 'outputTokens'], ['cache_read', 'cacheReadTokens'], ['cache_write', 'cacheWriteTokens'],
] as const;

/**
 * Prometheus metrics of one gateway, in a registry of its own (never prom-client's global one, so that
 * several gateways can run in one process). Token and LLM-call counters continue from the ledger across
 * restarts ({@link seed}); the others count from the process start.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly turns: Counter<'channel' | 'outcome'>;
  private readonly turnErrors: Counter<'channel'>;
  private readonly turnDuration: Histogram<'channel'>;
  private readonly llmCalls: Counter<'provider' | 'model' | 'kind' | 'channel'>;
  private readonly llmErrors: Counter<'provider' | 'model' | 'code'>;
  private readonly llmRetries: Counter<'provider' | 'model'>;
  private readonly llmDuration: Histogram<'provider' | 'model'>;
  private readonly tokens: Counter<'type' | 'provider' | 'model' | 'kind' | 'channel'>;
  private readonly toolCalls: Counter<'tool' | 'outcome'>;
  private readonly batches: Counter<'outcome'>;
  private readonly cutResults: Counter<'tool'>;
  private readonly refusals: Counter<'reason'>;

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    this.turns = new Counter({ name: 'switchboard_turns_total', help: 'Turns finished, by channel and outcome (replied, command, failed, stopped).', labelNames: ['channel', 'outcome'], registers });
    this.turnErrors = new Counter({ name: 'switchboard_turn_errors_total', help: 'Turns that failed (the user got an apology).', labelNames: ['channel'], registers });
    this.turnDuration = new Histogram({
      name: 'switchboard_turn_duration_seconds', help: 'Turn latency, from the start of the run to the reply.', labelNames: ['channel'], registers,
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300],
    });
    this.llmCalls = new Counter({ name: 'switchboard_llm_calls_total', help: 'LLM calls, by provider, model, call kind (turn, compaction, memory-flush) and channel.', labelNames: ['provider', 'model', 'kind', 'channel'], registers });
    this.llmErrors = new Counter({ name: 'switchboard_llm_errors_total', help: 'LLM calls that failed, by error code.', labelNames: ['provider', 'model', 'code'], registers });
    this.llmRetries = new Counter({ name: 'switchboard_llm_retries_total', help: 'Provider request retries (429, 5xx, connection errors).', labelNames: ['provider', 'model'], registers });
    this.llmDuration = new Histogram({
      name: 'switchboard_llm_call_duration_seconds', help: 'LLM call latency, retries included.', labelNames: ['provider', 'model'], registers,
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120],
    });
    this.tokens = new Counter({
      name: 'switchboard_tokens_total',
      help: 'Tokens of LLM calls by type (input, output, cache_read, cache_write), provider, model, call kind and channel. Sums to the token ledger.',
      labelNames: ['type', 'provider', 'model', 'kind', 'channel'], registers,
    });
    this.toolCalls = new Counter({ name: 'switchboard_tool_calls_total', help: 'Tool calls, by tool and outcome (ok, error, invalid_arguments, timeout, unknown_tool, not_enabled, interrupted).', labelNames: ['tool', 'outcome'], registers });
    this.refusals = new Counter({ name: 'switchboard_refusals_total', help: 'Calls and messages refused, by reason (session_budget, rate_limit, run_budget); nothing was charged for them.', labelNames: ['reason'], registers });
    this.cutResults = new Counter({ name: 'switchboard_tool_results_cut_total', help: 'Tool results cut to tools.maxResultChars, by tool.', labelNames: ['tool'], registers });
    this.batches = new Counter({ name: 'switchboard_background_batches_total', help: 'Background batches of goal runs, by outcome (completed, continuing, budget-limited, stopped, failed).', labelNames: ['outcome'], registers });
    new Gauge({ name: 'switchboard_active_sessions', help: 'Sessions in the active cache (memory).', registers, collect() { this.set(sources.activeSessions()); } });
    new Counter({
      name: 'switchboard_session_evictions_total', help: 'Sessions evicted from memory (nothing persisted is deleted).', registers,
      collect() { this.reset(); this.inc(sources.evictions()); },
    });
    new Gauge({ name: 'switchboard_queue_depth', help: 'Messages waiting on session lanes.', registers, collect() { this.set(sources.queueDepth()); } });
    new Gauge({ name: 'switchboard_running_turns', help: 'Turns running now.', registers, collect() { this.set(sources.runningTurns()); } });
    new Counter({
      name: 'switchboard_messages_total', help: 'Inbound messages by what the gateway did with them.', labelNames: ['status'], registers,
      collect() {
        this.reset();
        for (const [status, n] of Object.entries(sources.messages())) this.inc({ status }, n);
      },
    });
    if (sources.repliesFailed) {
      const failed = sources.repliesFailed.bind(sources);
      new Counter({
        name: 'switchboard_replies_failed_total', help: 'Replies the platform never took, given up on after delivery.maxAttempts, by channel (channel/account).', labelNames: ['channel'], registers,
        collect() {
          this.reset();
          for (const [channel, n] of Object.entries(failed())) this.inc({ channel }, n);
        },
      });
    }
    if (sources.jobRuns) {
      const runs = sources.jobRuns.bind(sources);
      new Counter({
        name: 'switchboard_job_runs_total', help: 'Scheduled job runs since start, by outcome (delivered, silent, failed, undeliverable, budget).', labelNames: ['outcome'], registers,
        collect() {
          this.reset();
          for (const [outcome, n] of Object.entries(runs())) this.inc({ outcome }, n);
        },
      });
    }
    if (sources.failovers) {
      const failovers = sources.failovers.bind(sources);
      new Counter({
        name: 'switchboard_provider_failovers_total', help: 'LLM calls moved to another key or model, by the provider left, the one tried next ("" when none was left) and the error code.',
        labelNames: ['from', 'to', 'code'], registers,
        collect() {
          this.reset();
          for (const c of failovers().counts) this.inc({ from: c.from, to: c.to, code: c.code }, c.count);
        },
      });
      new Gauge({ name: 'switchboard_provider_keys_cooling_down', help: 'Provider keys cooling down after a failure (skipped until then).', registers, collect() { this.set(failovers().coolingDown); } });
    }
    if (sources.cluster) {
      const cluster = sources.cluster.bind(sources);
      const counter = (name: string, help: string, pick: (c: ReturnType<typeof cluster>) => number) => new Counter({
        name, help, registers, collect() { this.reset(); this.inc(pick(cluster())); },
      });
      counter('switchboard_cluster_lane_takeovers_total', 'Sessions this replica took over from another replica with a message left unfinished.', (c) => c.takeovers);
      counter('switchboard_cluster_lease_losses_total', 'Session locks this replica lost with their database connection (a freeze or a network cut).', (c) => c.leaseLosses);
      counter('switchboard_cluster_reruns_total', 'Messages this replica ran again after an attempt that did not finish (its LLM calls may be paid twice).', (c) => c.reruns);
      counter('switchboard_cluster_channel_lease_losses_total', 'Channel leases (a Telegram poller, a Discord shard) this replica held and lost with their database connection; another replica takes them over.', (c) => c.channelLeaseLosses ?? 0);
      counter('switchboard_cluster_duplicate_reply_windows_total', 'Replies whose earlier sending was not recorded: the platform may have received them twice.', (c) => c.duplicateWindows);
    }
  }

  /** Counts a record read back from the ledger at start. */
  seed(record: LedgerRecord): void {
    this.llmCalls.inc({ provider: record.providerId, model: record.modelId, kind: record.kind, channel: record.channel });
    this.addTokens(record);
  }

  /** Counts the calls of a ledger summary group at start (records summed, see `LedgerSummary`). */
  seedGroup(group: UsageGroup): void {
    const labels = { provider: group.providerId, model: group.modelId, kind: group.kind, channel: group.channel };
    if (group.calls > 0) this.llmCalls.inc(labels, group.calls);
    for (const [type, field] of TOKEN_TYPES) {
      const n = group[field];
      if (n > 0) this.tokens.inc({ ...labels, type }, n);
    }
  }

  /** Counts one LLM call as it happens; `record` is its ledger record when it succeeded. */
  llmCall(event: LlmCallEvent, record: LedgerRecord | undefined): void {
    // Label objects are written out: `{ ...model, kind }` costs microseconds per added key on Node 20 (see scopedEvent).
    const model = { provider: event.providerId, model: event.modelId };
    this.llmCalls.inc({ provider: event.providerId, model: event.modelId, kind: event.kind, channel: event.channel });
    this.llmDuration.observe(model, event.durationMs / 1000);
    if (event.retries) this.llmRetries.inc(model, event.retries);
    if (event.error) this.llmErrors.inc({ provider: event.providerId, model: event.modelId, code: event.error });
    if (record) this.addTokens(record);
  }

  turnEnd(event: TurnEndEvent): void {
    this.turns.inc({ channel: event.channel, outcome: event.outcome });
    if (event.outcome === 'failed') this.turnErrors.inc({ channel: event.channel });
    this.turnDuration.observe({ channel: event.channel }, event.durationMs / 1000);
  }

  toolCall(event: ToolCallEvent): void {
    // The model names the tool: a name no tool has would become a label value of its choosing.
    this.toolCalls.inc({ tool: event.outcome === 'unknown_tool' ? 'unknown' : event.name, outcome: event.outcome });
    if (event.cutChars) this.cutResults.inc({ tool: event.name });
  }

  refusal(event: RefusalEvent): void {
    this.refusals.inc({ reason: event.reason });
  }

  batchEnd(event: BatchEndEvent): void {
    if (event.background) this.batches.inc({ outcome: event.outcome });
  }

  /** The Prometheus text exposition. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private addTokens(record: LedgerRecord): void {
    for (const [type, field] of TOKEN_TYPES) {
      const n = record[field];
      if (n > 0) this.tokens.inc({ provider: record.providerId, model: record.modelId, kind: record.kind, channel: record.channel, type }, n);
    }
  }
}
