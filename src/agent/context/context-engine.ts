import { randomUUID } from 'node:crypto';
import type { AgentConfig, ResolvedConfig } from '../../config/resolved.ts';
import type { TokenUsage } from '../../core/channel-adapter.ts';
import type { Clock } from '../../core/clock.ts';
import { BudgetExceededError, isAbortError } from '../../core/errors.ts';
import type { Logger } from '../../core/logger.ts';
import type { InboundMessage } from '../../core/message.ts';
import type { ChatMessage, Provider, ProviderResponse, ToolSchema } from '../../providers/types.ts';
import type { SessionEntry } from '../../sessions/entry.ts';
import type { ActiveSession } from '../../sessions/manager.ts';
import type { ToolCall, TranscriptCompaction, TranscriptEntry } from '../../sessions/transcript.ts';
import type { ToolOutcome } from '../../tools/tool.ts';
import { BootstrapLoader, type BootstrapFile, type BootstrapLimits } from './bootstrap.ts';
import { CompactionError, ContextOverflowError, planCompaction } from './compaction.ts';
import { activeHistory, buildContext, messageTokensOf, type BuiltContext, type ContextInput } from './context.ts';
import { extendContext, isContextOverflow, withInstruction } from './request-context.ts';
import { SUMMARY_BLOCKS_MAX_SHARE, systemWithBlocks } from './summary-blocks.ts';
import { makeCompactionSummary } from './summary-request.ts';
import { MAX_FLUSH_ROUNDS, memoryFileOf, memoryFlushPrompt } from './memory-flush.ts';
import { Pruner, type PruneStats } from './pruning.ts';
import { ephemeralSessionOf } from '../session-init.ts';
import { calibrationKey, isPlausible, PromptPrediction, TokenCalibration } from './token-calibration.ts';
import { countTokens } from '../../tokens/tokens.ts';
import type { LlmCallKind } from '../turn-events.ts';
import type { ProviderCallRequest } from '../provider-call.ts';
import { formatCount } from '../../core/plural.ts';
import { modelSeesImages } from '../../config/media.ts';
import type { MediaStore } from '../../media/media-store.ts';
import { ImageCache } from './image-cache.ts';

/** Compaction-and-retry rounds after a provider context-overflow error, before the user is told. */
export const MAX_OVERFLOW_RETRIES = 3;

/** What the engine uses of the runtime. */
export interface ContextEngineDeps {
  config: ResolvedConfig;
  clock: Clock;
  logger: Logger;
  historyOf(session: ActiveSession): Promise<TranscriptEntry[]>;
  appendEntries(session: ActiveSession, entries: TranscriptEntry[]): Promise<void>;
  /** The runtime's accounted LLM call (usage, session totals, llm-call event). */
  callProvider(request: ProviderCallRequest): Promise<ProviderResponse>;
  modelOf(entry: SessionEntry): { providerId: string; model: string; contextWindow: number; provider: Provider };
  agentFor(agentId: string | undefined): AgentConfig;
  toolSchemas(entry: SessionEntry): ToolSchema[];
  /** The session's IANA time zone (memory file dates, local time in the runtime line). */
  timezoneOf(entry: SessionEntry): string;
  /** Where the images of user entries are kept (SPEC §15); without it every image is its line. */
  mediaStore?: MediaStore;
  /** `memory_write`, the one tool of the silent memory flush; without it there is no flush. */
  memoryFlushTool?: {
    schema: ToolSchema;
    run(call: ToolCall, session: ActiveSession, scope: CallScope): Promise<ToolOutcome>;
  };
}

/** Who pays for a call and where its text may go. */
export interface CallScope {
  correlationId: string;
  signal: AbortSignal;
  /** Streaming of the turn's answer; never used for compaction or memory-flush calls. */
  onDelta?: (text: string) => void;
  message: InboundMessage;
  usage: TokenUsage;
  state: { estimated: boolean; model?: string };
  logger: Logger;
  /** One-off sessions write no memory notes. */
  ephemeral?: boolean;
}

/** One LLM call of a turn. */
export interface TurnCall extends CallScope {
  tools: ToolSchema[];
  /** The turn's start: the time the model is shown, constant through the tool loop. */
  turnStartedAt: number;
  /** Shared by the calls of one turn: a failed threshold compaction is not retried within the turn. */
  turnState: { compactionFailed?: boolean };
}

/** A request as it would be sent now, and what it costs. */
export interface AssembledContext {
  context: BuiltContext;
  /** Our count times the model's calibration factor. */
  estimate: number;
  factor: number;
  bootstrap: BootstrapFile[];
  pruned: PruneStats;
  provider: Provider;
  providerId: string;
  model: string;
  contextWindow: number;
  /** `contextWindow - reserveTokens` (the reserve capped at half the window): above it, the session is compacted. */
  threshold: number;
  tools: ToolSchema[];
  history: TranscriptEntry[];
  /** What `context` was built from (its history pruned as the request is): the summary request is built from it too. */
  input: ContextInput;
}

/** What a compaction did. */
export interface CompactionOutcome {
  compacted: boolean;
  tokensBefore: number;
  tokensAfter: number;
  /** Set when not compacted: why. */
  reason?: 'nothing-to-compact' | 'failed' | 'disabled';
  error?: string;
  summaryCalls?: number;
  parts?: number;
  /** True when the compaction merged the summary blocks into one (they had passed their share of the window). */
  merged?: boolean;
}

/**
 * The context engine (SPEC §5): assembles every request (bootstrap files, stable prefix, pruning), keeps the
 * per-model token calibration, compacts a session over its threshold (after a silent memory flush), and
 * recovers from provider context-overflow errors by compacting and retrying.
 */
export class ContextEngine {
  readonly calibration = new TokenCalibration();
  /** The session budget's prompt prediction from the provider's last reported prompt size (SPEC §14). */
  private readonly prompts = new PromptPrediction();
  private readonly deps: ContextEngineDeps;
  private readonly bootstrap = new BootstrapLoader();
  private readonly pruner = new Pruner();
  /** Session id → compaction count at its last memory flush (once per compaction). In memory. */
  private readonly flushedAt = new Map<string, number>();
  private readonly images: ImageCache;

  constructor(deps: ContextEngineDeps) {
    this.deps = deps;
    this.images = new ImageCache({ store: deps.mediaStore });
  }

  /** The workspace of a session's agent (bootstrap files, memory notes). */
  workspaceOf(entry: SessionEntry): string {
    return this.deps.agentFor(entry.agentId).workspace;
  }

  private get settings() {
    return this.deps.config.agentDefaults;
  }

  private get limits(): BootstrapLimits {
    return { maxChars: this.settings.bootstrapMaxChars, totalMaxChars: this.settings.bootstrapTotalMaxChars };
  }

  /**
   * The request the session would send now. `plan` lets pruning take a fresh decision when its TTL has
   * passed (only real calls do; `/context` only looks). `history` replaces the transcript (to measure a
   * compaction before it is written).
   */
  async assemble(session: ActiveSession, options: { tools?: ToolSchema[]; now?: number; plan?: boolean; history?: TranscriptEntry[] } = {}): Promise<AssembledContext> {
    const entry = session.entry;
    const { provider, providerId, model, contextWindow } = this.deps.modelOf(entry);
    const agent = this.deps.agentFor(entry.agentId);
    const factor = this.calibration.factor(calibrationKey(providerId, model));
    // A reserve as large as the window (the 16k default with a small local model) would compact every turn.
    const threshold = contextWindow - Math.min(this.settings.compaction.reserveTokens, Math.floor(contextWindow / 2));
    const tools = options.tools ?? this.deps.toolSchemas(entry);
    const history = options.history ?? await this.deps.historyOf(session);
    const bootstrap = await this.bootstrap.load(agent.workspace, this.limits);
    const imageOf = modelSeesImages(agent.vision, model) ? await this.loadImages(history) : undefined;
    const base = {
      agent, entry, model, tools, now: options.now ?? this.deps.clock.now(), bootstrap, bootstrapLimits: this.limits,
      timezone: this.deps.timezoneOf(entry), contextWindow, history, ...(imageOf ? { imageOf } : {}),
    };
    let input: ContextInput = base;
    let context = buildContext(base);
    let pruned: PruneStats = { trimmed: 0, cleared: 0 };
    const pruning = this.settings.contextPruning;
    if (pruning.mode !== 'off') {
      const keptTokens = context.kept.reduce((n, m) => n + messageTokensOf(m, model), 0);
      const result = this.pruner.prepare(entry.sessionId, history, pruning,
        { now: this.deps.clock.now(), lastRequestAt: options.plan ? entry.lastRequestAt : undefined },
        { budgetTokens: threshold, fixedTokens: context.tokens - keptTokens, factor, model });
      pruned = result.stats;
      if (pruned.trimmed || pruned.cleared) {
        input = { ...base, history: result.history };
        context = buildContext(input);
      }
    }
    return {
      context, estimate: Math.round(context.tokens * factor), factor, bootstrap, pruned, provider, providerId, model, contextWindow,
      threshold, tools, history, input,
    };
  }

  /** The images of the history since its last compaction, loaded; the image source of a model that sees (SPEC §15). */
  private async loadImages(history: readonly TranscriptEntry[]): Promise<ImageCache['imageOf']> {
    let from = history.length;
    let any = false;
    while (from > 0) {
      const e = history[from - 1] as TranscriptEntry;
      if (e.type === 'compaction') break;
      if (e.media) any = true;
      from--;
    }
    if (any) await this.images.load(history, from);
    return this.images.imageOf;
  }

  /**
   * What every request of the session costs before any message (system prompt, bootstrap files, tool schemas of
   * its preset), calibrated: a session token budget below it refuses every first message (SPEC §14).
   */
  private async fixedPromptTokens(entry: SessionEntry): Promise<number> {
    return (await this.assemble({ key: entry.key, entry, holds: 0 }, { history: [] })).estimate;
  }

  /**
   * The line `/status` and the start-up log show when a session's token budget is below its fixed prompt cost;
   * undefined when it is not (or there is no budget).
   */
  async budgetBelowFixedCost(entry: SessionEntry): Promise<string | undefined> {
    const budget = this.deps.agentFor(entry.agentId).tokenBudget;
    if (!budget) return undefined;
    const fixed = await this.fixedPromptTokens(entry);
    if (fixed <= budget) return undefined;
    return `${this.budgetKeyOf(entry)} (${formatCount(budget)}) is below what every request of agent ${entry.agentId} costs before any message (about ${formatCount(fixed)} tokens: system prompt, bootstrap files and tool schemas), so every first message is refused: raise it, or choose a smaller tools preset.`;
  }

  /** {@link budgetBelowFixedCost} for a new direct session of each agent (logged at start). */
  async budgetWarnings(): Promise<string[]> {
    const lines: string[] = [];
    for (const agent of this.deps.config.agents) {
      if (!agent.tokenBudget) continue;
      const { entry } = ephemeralSessionOf({ key: `agent:${agent.id}:main`, agentId: agent.id, channel: 'webchat', accountId: 'default', chatType: 'direct' }, this.deps.clock.now());
      const line = await this.budgetBelowFixedCost(entry);
      if (line) lines.push(line);
    }
    return lines;
  }

  /**
   * One LLM call of a turn: compacts first when the request is over the threshold (after a memory flush),
   * and on a provider context-overflow error compacts harder and retries, at most {@link MAX_OVERFLOW_RETRIES}
   * times; then throws {@link ContextOverflowError}, whose message is meant for the user.
   */
  async complete(session: ActiveSession, call: TurnCall): Promise<ProviderResponse> {
    const compaction = this.settings.compaction;
    let retries = 0;
    let compactions = 0;
    for (;;) {
      let assembled = await this.assemble(session, { tools: call.tools, now: call.turnStartedAt, plan: true });
      if (compaction.enabled && assembled.estimate > assembled.threshold && !call.turnState.compactionFailed) {
        const outcome = await this.compactSafely(session, call, { reason: 'threshold', tools: call.tools });
        if (outcome.compacted) {
          compactions++;
          assembled = await this.assemble(session, { tools: call.tools, now: call.turnStartedAt });
        } else if (outcome.reason === 'failed') {
          call.turnState.compactionFailed = true;
        }
      }
      try {
        return await this.callCounted(session, assembled, assembled.context, 'turn', call, call.tools);
      } catch (error) {
        if (!isContextOverflow(error)) throw error;
        if (!compaction.enabled || retries >= MAX_OVERFLOW_RETRIES) throw new ContextOverflowError(compactions, error);
        retries++;
        call.logger.warn({ attempt: retries, tokens: assembled.estimate }, 'the provider says the context is too long; compacting and retrying');
        const keepTokens = Math.floor(this.keepTokens(assembled) / 2 ** retries);
        const outcome = await this.compactSafely(session, call, { reason: 'overflow', keepTokens, tools: call.tools });
        if (!outcome.compacted) throw new ContextOverflowError(compactions, error);
        compactions++;
      }
    }
  }

  /** `/compact` and the admin API: compacts now (after a memory flush), whatever the size. */
  async compactNow(session: ActiveSession, scope: CallScope, instructions?: string): Promise<CompactionOutcome> {
    return this.compact(session, scope, { reason: 'manual', instructions });
  }

  /**
   * Summarizes the messages after the last summary block and before the recent tail into a `compaction` entry
   * that appends one more block (or, once the blocks pass their share of the window, merges them and the new
   * part into one). The full history stays in the transcript. Throws when a summary call fails; the session is
   * then unchanged. `tools` are the turn's (the summary request carries them, so its prefix is the turn's).
   */
  async compact(session: ActiveSession, scope: CallScope, options: { reason: 'threshold' | 'overflow' | 'manual'; instructions?: string; keepTokens?: number; tools?: ToolSchema[] }): Promise<CompactionOutcome> {
    const entry = session.entry;
    const before = await this.assemble(session, options.tools ? { tools: options.tools } : {});
    if (!this.settings.compaction.enabled && options.reason !== 'manual') return { compacted: false, tokensBefore: before.estimate, tokensAfter: before.estimate, reason: 'disabled' };
    const { blocks, kept } = activeHistory(before.history);
    const keepTokens = options.keepTokens ?? this.keepTokens(before);
    const plan = planCompaction(kept, keepTokens, before.model);
    if (!plan) return { compacted: false, tokensBefore: before.estimate, tokensAfter: before.estimate, reason: 'nothing-to-compact' };
    await this.flushMemory(session, scope, before);
    const blocksTokens = blocks.length ? countTokens(systemWithBlocks('', blocks).blocksText, before.model) * before.factor : 0;
    const mode = blocksTokens > SUMMARY_BLOCKS_MAX_SHARE * before.contextWindow ? 'merge' : 'append';
    const result = await makeCompactionSummary({
      prefix: { input: before.input, tools: before.tools, model: before.model, factor: before.factor, threshold: before.threshold },
      plan, blocks, mode, ...(options.instructions ? { instructions: options.instructions } : {}),
      call: (context, tools) => this.callCounted(session, before, context, 'compaction', scope, tools),
    }).catch((error: unknown) => {
      if (isAbortError(error) || scope.signal.aborted || error instanceof CompactionError || error instanceof BudgetExceededError) throw error;
      throw new CompactionError(`The summary call failed (${(error as Error).message}).`, error);
    });
    const record: TranscriptCompaction = {
      type: 'compaction', id: randomUUID(), summary: result.summary, firstKeptId: plan.firstKeptId,
      tokensBefore: before.estimate, tokensAfter: 0, at: new Date(this.deps.clock.now()).toISOString(), ...(result.appended ? { appended: true } : {}),
    };
    const after = await this.assemble(session, { history: [...before.history, record], ...(options.tools ? { tools: options.tools } : {}) });
    record.tokensAfter = after.estimate;
    await this.deps.appendEntries(session, [record]);
    entry.compactionCount++;
    entry.contextTokens = after.estimate;
    const merged = mode === 'merge';
    scope.logger.info({
      reason: options.reason, tokensBefore: record.tokensBefore, tokensAfter: record.tokensAfter, summarized: plan.summarize.length, kept: plan.keep.length,
      summaryCalls: result.calls, parts: result.parts, blocks: result.appended ? blocks.length + 1 : 1, merged, sharedPrefix: result.sharedPrefix,
    }, 'session compacted');
    return { compacted: true, tokensBefore: record.tokensBefore, tokensAfter: record.tokensAfter, summaryCalls: result.calls, parts: result.parts, ...(merged ? { merged } : {}) };
  }

  /** {@link compact}, with a failed summary logged and reported instead of thrown (aborts still propagate). */
  private async compactSafely(session: ActiveSession, scope: CallScope, options: Parameters<ContextEngine['compact']>[2]): Promise<CompactionOutcome> {
    try {
      return await this.compact(session, scope, options);
    } catch (error) {
      // Over the session budget the turn is refused with the budget line (counted once), not retried.
      if (isAbortError(error) || scope.signal.aborted || error instanceof BudgetExceededError) throw error;
      scope.logger.warn({ err: error, reason: options.reason }, 'compaction failed; the session stays as it was and compaction is tried again at the next turn');
      const message = error instanceof Error ? error.message : String(error);
      return { compacted: false, tokensBefore: session.entry.contextTokens, tokensAfter: session.entry.contextTokens, reason: 'failed', error: message };
    }
  }

  /** One silent turn that lets the agent write durable notes before a compaction; once per compaction. */
  private async flushMemory(session: ActiveSession, scope: CallScope, assembled: AssembledContext): Promise<void> {
    const entry = session.entry;
    const tool = this.deps.memoryFlushTool;
    if (!this.settings.compaction.memoryFlush || scope.ephemeral || !tool) return;
    if (this.flushedAt.get(entry.sessionId) === entry.compactionCount) return;
    this.flushedAt.delete(entry.sessionId);
    this.flushedAt.set(entry.sessionId, entry.compactionCount);
    if (this.flushedAt.size > 10_000) this.flushedAt.delete(this.flushedAt.keys().next().value as string);
    const prompt = memoryFlushPrompt(memoryFileOf(this.deps.clock.now(), this.deps.timezoneOf(entry)));
    let context = withInstruction(assembled.context, prompt, assembled.model);
    let written = 0;
    try {
      for (let round = 0; round < MAX_FLUSH_ROUNDS; round++) {
        const response = await this.callCounted(session, assembled, context, 'memory-flush', scope, [tool.schema]);
        if (!response.toolCalls.length) break;
        const added: ChatMessage[] = [{ role: 'assistant', content: response.content, toolCalls: response.toolCalls }];
        for (const call of response.toolCalls) {
          const outcome = await tool.run(call, session, scope);
          if (outcome.outcome === 'ok') written++;
          added.push({ role: 'tool', content: outcome.content, toolCallId: call.id });
        }
        context = extendContext(context, added, assembled.model);
      }
      if (written) scope.logger.info({ notes: written }, 'memory flush wrote notes');
    } catch (error) {
      // A flush refused by the session budget stops the compaction: its summary call would be refused too.
      if (isAbortError(error) || scope.signal.aborted || error instanceof BudgetExceededError) throw error;
      scope.logger.warn({ err: error }, 'memory flush failed; compacting anyway');
    }
  }

  /** The accounted call, then calibration from the reported prompt size. */
  private async callCounted(session: ActiveSession, assembled: AssembledContext, context: BuiltContext, kind: LlmCallKind, scope: CallScope, tools: ToolSchema[]): Promise<ProviderResponse> {
    const calibrated = context === assembled.context ? assembled.estimate : Math.round(context.tokens * assembled.factor);
    const response = await this.deps.callProvider({
      session, provider: assembled.provider, model: assembled.model, context, kind,
      input: { correlationId: scope.correlationId, signal: scope.signal, onDelta: kind === 'turn' ? scope.onDelta : undefined, message: scope.message },
      usage: scope.usage, state: scope.state, logger: scope.logger, tools,
      estimate: kind === 'compaction' ? calibrated : this.prompts.predict(session.entry, context.tokens, calibrated), budgetKey: this.budgetKeyOf(session.entry),
    });
    const counted = context.tokens;
    const reported = response.usage ? response.usage.inputTokens + response.usage.cacheReadTokens + response.usage.cacheWriteTokens : undefined;
    if (reported !== undefined) this.calibration.observe(calibrationKey(assembled.providerId, assembled.model), reported, counted);
    if (reported !== undefined && kind === 'turn') this.prompts.record(session.entry, reported, counted);
    if (kind === 'turn') {
      session.entry.contextTokens = reported !== undefined && isPlausible(reported, counted)
        ? reported
        : Math.round(counted * this.calibration.factor(calibrationKey(assembled.providerId, assembled.model)));
    }
    return response;
  }

  /** The setting a session's token budget comes from (named when a call is refused, SPEC §14). */
  private budgetKeyOf(entry: SessionEntry): string {
    const agent = this.deps.agentFor(entry.agentId);
    return agent.tokenBudget !== this.deps.config.session.tokenBudget ? `agents.list[${agent.id}].tokenBudget` : 'session.tokenBudget';
  }

  /** Tokens (ours) of the verbatim tail: `keepRecentTokens`, but at most half the budget of a small window. */
  private keepTokens(assembled: AssembledContext): number {
    const keep = Math.min(this.settings.compaction.keepRecentTokens, Math.floor(assembled.threshold / 2));
    return Math.max(0, Math.floor(keep / assembled.factor));
  }
}

/** A stand-in inbound message for work that no chat message started (admin compaction). */
export function syntheticMessage(entry: SessionEntry, text: string, now: number): InboundMessage {
  return {
    id: `internal-${randomUUID()}`, channel: entry.channel, accountId: entry.accountId, chatType: entry.chatType,
    chatId: entry.deliveryTarget?.chatId ?? entry.groupId ?? entry.peerId ?? entry.key, peerId: entry.peerId ?? '',
    ...(entry.groupId ? { groupId: entry.groupId } : {}), ...(entry.threadId ? { threadId: entry.threadId } : {}),
    sender: { id: 'switchboard' }, text, attachments: [], mentionsBot: false, receivedAt: now,
  };
}
