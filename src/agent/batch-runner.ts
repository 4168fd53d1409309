import { randomUUID } from 'node:crypto';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { TokenUsage, TurnResult } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import { BudgetExceededError, TurnAbortedError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import type { ProviderResponse, ToolSchema } from '../providers/types.ts';
import type { RunCheckpoint, SessionEntry } from '../sessions/entry.ts';
import type { ActiveSession } from '../sessions/manager.ts';
import type { TranscriptEntry, TranscriptMessage } from '../sessions/transcript.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { ToolOutcome } from '../tools/tool.ts';
import { ContextOverflowError } from './context/compaction.ts';
import type { ContextEngine } from './context/context-engine.ts';
import { batchLimitText, interruptedResult, isBackgroundKind, isShutdown, runBudgetReached, sourceIdOf, stoppedResult } from './runs.ts';
import { scopedEvent, type TurnEvents, type TurnScope } from './turn-events.ts';
import { userContent } from './user-content.ts';
import { isInterrupt, PartialAnswer, steerIn, userEntryOf } from './turn-joins.ts';
import type { TurnInput } from './turn-input.ts';
import { formatCount } from '../core/plural.ts';

/** What a batch needs of the runtime. */
export interface BatchDeps {
  config: ResolvedConfig;
  clock: Clock;
  events: TurnEvents;
  contextEngine: ContextEngine;
  registry: ToolRegistry;
  historyOf(session: ActiveSession): Promise<TranscriptEntry[]>;
  /**
   * Appends to the session's transcript. With `later`, the entries wait for the turn's next append (or its end) and
   * go in the same write, one statement fewer per turn in cluster mode; the history read meanwhile includes them.
   */
  appendEntries(session: ActiveSession, entries: TranscriptEntry[], later?: boolean): Promise<void>;
  /** Persists the entry (runState and checkpoint); failures are logged, never thrown. */
  persist(entry: SessionEntry, logger: Logger): Promise<void>;
  toolSchemas(entry: SessionEntry, ephemeral?: boolean): ToolSchema[];
  /** The wait for tools still connecting that the session's policy would enable (MCP servers), or undefined when there are none. */
  toolsArriving(entry: SessionEntry, ephemeral: boolean | undefined, signal: AbortSignal, logger: Logger): Promise<void> | undefined;
  workspaceOf(entry: SessionEntry): string;
  timezoneOf(entry: SessionEntry): string;
}

/** How a batch ended, for the runtime and the gateway. */
export interface BatchResult {
  /** The answer to send; empty for a silent background batch. */
  text: string;
  outcome: 'replied' | 'skipped';
  continuation?: TurnResult['continuation'];
}

/** Per-turn accounting the runtime passes through. */
export interface BatchScope {
  usage: TokenUsage;
  state: { estimated: boolean; model?: string };
  logger: Logger;
  scope: () => TurnScope;
}

/**
 * One batch of a run (SPEC §11): the user entry (never twice for a replayed delivery), results for tool
 * calls a crash interrupted, then at most `maxIterationsPerBatch` LLM calls, each answer's tool calls run
 * in order with every call and result written to the transcript, and the checkpoint persisted after every
 * result. A batch that reaches the limit ends `continuing` and asks for a background continuation when the
 * session has a goal and background execution is on.
 */
export class BatchRunner {
  private readonly deps: BatchDeps;

  constructor(deps: BatchDeps) {
    this.deps = deps;
  }

  async run(session: ActiveSession, input: TurnInput, scope: BatchScope): Promise<BatchResult> {
    const partial = new PartialAnswer();
    try {
      return await this.runBatch(session, input, scope, partial);
    } catch (error) {
      // Queue mode interrupt: the partial answer stays in the transcript, marked interrupted (SPEC §16).
      if (partial.started && isInterrupt(input.signal)) await this.deps.appendEntries(session, [partial.entry(input.correlationId, this.iso())]);
      throw error;
    }
  }

  private async runBatch(session: ActiveSession, input: TurnInput, scope: BatchScope, partial: PartialAnswer): Promise<BatchResult> {
    const { message, signal, correlationId } = input;
    const entry = session.entry;
    const kind = message.internal?.kind;
    const background = isBackgroundKind(kind);
    const history = await this.deps.historyOf(session);
    await this.repairInterrupted(session, history, input, scope);

    const sourceId = sourceIdOf(message);
    const recorded = input.replayed ? findRecorded(history, sourceId) : undefined;
    if (recorded?.answer !== undefined) {
      scope.logger.info({ sourceId }, 'replayed message was already answered; its recorded answer is sent, the model is not called again');
      entry.runState = entry.goal ? 'completed' : 'idle';
      return { text: recorded.answer, outcome: 'replied' };
    }
    if (recorded?.overtaken) {
      // A later turn (a start-up resume of the same run) already ran with this message in its history and answered.
      scope.logger.info({ sourceId }, 'replayed message was taken up by a later turn; the model is not called again');
      entry.runState = input.priorRunState ?? 'idle';
      return { text: '', outcome: 'skipped' };
    }
    if (!recorded) {
      await this.deps.appendEntries(session, [{
        type: 'message', id: randomUUID(), role: 'user', content: userContent(message, input.groupContext), at: this.iso(), correlationId,
        ...(message.chatType !== 'direct' && message.sender.name && !message.internal ? { name: message.sender.name } : {}), sourceId,
        ...(message.media?.length ? { media: message.media } : {}),
      }], true);
    }
    // Queue mode collect: the burst's other messages, each its own entry (and sourceId).
    if (input.joined?.length) await this.deps.appendEntries(session, input.joined.map((m) => userEntryOf(m, correlationId, this.iso())), true);
    partial.started = true;

    const limits = this.deps.config.backgroundExecution;
    const max = this.deps.config.agentDefaults.maxIterationsPerBatch;
    const previous = entry.checkpoint;
    const checkpoint: RunCheckpoint = ongoingGoal(previous, entry, background, input.priorRunState)
      // A start-up resume, or the same delivery run again after a crash or a takeover, goes on with the batch it cut
      // short (it does not count against maxBatchesPerGoal twice); anything else is the goal's next batch.
      ? { ...previous, batch: kind === 'background_auto_resume' || (input.replayed && previous?.correlationId === correlationId) ? Math.max(1, previous.batch) : previous.batch + 1, iteration: 0, correlationId }
      : { goal: entry.goal, batch: 1, iteration: 0, correlationId, toolCalls: 0, tokens: 0, startedAt: this.deps.clock.now() };
    entry.checkpoint = checkpoint;
    entry.runState = 'running';

    const turnStartedAt = this.deps.clock.now();
    const turnState = {};
    const tokensBefore = (checkpoint.tokens ?? 0) - scope.usage.inputTokens - scope.usage.outputTokens;
    const goalRun = limits.enabled && Boolean(entry.goal) && !message.ephemeral;
    const said = new SaidText(input.onDelta);
    const arriving = this.deps.toolsArriving(entry, message.ephemeral, signal, scope.logger);
    if (arriving) await arriving;
    for (let iteration = 0; iteration < max; iteration++) {
      if (signal.aborted) throw new TurnAbortedError();
      const overBudget = goalRun ? runBudgetReached(checkpoint, limits, this.deps.clock.now()) : undefined;
      if (overBudget) {
        this.deps.events.emit('onRefusal', { reason: 'run_budget', correlationId, channel: message.channel, sessionKey: entry.key, at: this.deps.clock.now() });
        scope.logger.info({ budget: overBudget.which, checkpoint }, 'goal run stopped at its budget');
        return this.refused(session, said.with(overBudget.text), checkpoint, background, scope, iteration);
      }
      const tools = this.deps.toolSchemas(entry, message.ephemeral);
      let response: ProviderResponse;
      try {
        response = await this.deps.contextEngine.complete(session, {
          correlationId, signal, onDelta: partial.watch(said.onDelta), message, usage: scope.usage, state: scope.state, logger: scope.logger, tools, turnStartedAt, turnState,
          ephemeral: message.ephemeral,
        });
      } catch (error) {
        if (error instanceof BudgetExceededError) return this.refused(session, said.with(error.message), checkpoint, background, scope, iteration);
        if (!(error instanceof ContextOverflowError)) throw error;
        await this.deps.appendEntries(session, [this.assistant(error.message, correlationId)]);
        return this.finish(session, said.with(error.message), checkpoint, background, scope, iteration + 1);
      }
      checkpoint.tokens = tokensBefore + scope.usage.inputTokens + scope.usage.outputTokens;
      checkpoint.iteration = iteration + 1;
      if (response.toolCalls.length === 0) {
        const final = this.assistant(response.content, correlationId);
        await this.deps.appendEntries(session, [final]);
        checkpoint.lastEntryId = final.id;
        return this.finish(session, said.with(response.content.trim()) || '(no answer)', checkpoint, background, scope, iteration + 1);
      }
      said.add(response.content);
      partial.settle(response.content);
      const calls = response.toolCalls.map((c, i) => ({ ...c, id: c.id || `call_${randomUUID().slice(0, 8)}_${i}` }));
      const asked: TranscriptMessage = { ...this.assistant(response.content, correlationId), toolCalls: calls };
      // The call is on disk before it runs: after a crash, a call with no result is known to be interrupted.
      await this.deps.appendEntries(session, [asked]);
      checkpoint.lastEntryId = asked.id;
      // `running` is on disk before the first tool of the batch runs, so a crash from here on is resumed.
      if (iteration === 0) await this.deps.persist(entry, scope.logger);
      else void this.deps.persist(entry, scope.logger);
      for (const call of calls) {
        const t0 = this.deps.clock.now();
        // The tool-call budget holds within one answer too: calls past it are not run.
        const skipped = goalRun && limits.maxToolCalls > 0 && (checkpoint.toolCalls ?? 0) >= limits.maxToolCalls;
        let outcome: ToolOutcome;
        try {
          outcome = skipped
            ? { outcome: 'error', content: toolBudgetResult(limits.maxToolCalls) }
            : await this.deps.registry.execute(call, tools, {
              entry, message, correlationId, signal, logger: scope.logger, workspace: this.deps.workspaceOf(entry), timezone: this.deps.timezoneOf(entry),
              now: () => this.deps.clock.now(), lendSlot: input.lendSlot ?? ((work) => work()),
              ...(input.sendFile ? { sendFile: input.sendFile } : {}),
            });
        } catch (error) {
          // A user's stop: the call gets its result now, saying so (a shutdown leaves it to the next start's
          // "interrupted" result, which the model reads before it runs again).
          if (signal.aborted && !isShutdown(signal)) {
            await this.deps.appendEntries(session, [{ type: 'message', id: randomUUID(), role: 'tool', content: stoppedResult(call.name), toolCallId: call.id, at: this.iso(), correlationId }]);
            this.deps.events.emit('onToolCall', scopedEvent(scope.scope(), { name: this.deps.registry.get(call.name) ? call.name : 'unknown', ok: false, outcome: 'interrupted', durationMs: this.deps.clock.now() - t0, at: this.deps.clock.now() }));
          }
          throw error;
        }
        const result: TranscriptMessage = { type: 'message', id: randomUUID(), role: 'tool', content: outcome.content, toolCallId: call.id, at: this.iso(), correlationId };
        await this.deps.appendEntries(session, [result]);
        checkpoint.lastEntryId = result.id;
        if (!skipped) checkpoint.toolCalls = (checkpoint.toolCalls ?? 0) + 1;
        // Ordered and coalesced per key; the transcript already holds the result, and the batch's end awaits it.
        void this.deps.persist(entry, scope.logger);
        if (!skipped) this.deps.events.emit('onToolCall', scopedEvent(scope.scope(), { name: call.name, ok: outcome.outcome === 'ok', outcome: outcome.outcome, ...(outcome.cutChars ? { cutChars: outcome.cutChars } : {}), durationMs: this.deps.clock.now() - t0, at: this.deps.clock.now() }));
        if (signal.aborted) throw new TurnAbortedError();
      }
      // Queue mode steer: messages that arrived meanwhile join here, when a model request is left to carry them.
      if (iteration + 1 < max) await steerIn(input.takeSteered, (e) => this.deps.appendEntries(session, e), correlationId, this.iso(), scope.logger);
    }
    return this.atLimit(session, checkpoint, background, message, scope, max, said);
  }

  /** Gives every call of the last tool-calling answer that has no result an "interrupted" result. */
  private async repairInterrupted(session: ActiveSession, history: readonly TranscriptEntry[], input: TurnInput, scope: BatchScope): Promise<void> {
    const answered = new Set<string>();
    for (let i = history.length - 1; i >= 0; i--) {
      const e = history[i] as TranscriptEntry;
      if (e.type !== 'message') continue;
      if (e.role === 'tool' && e.toolCallId) answered.add(e.toolCallId);
      else if (e.role === 'user') return;
      else if (e.role === 'assistant' && e.toolCalls?.length) {
        const missing = e.toolCalls.filter((c) => !answered.has(c.id));
        if (!missing.length) return;
        await this.deps.appendEntries(session, missing.map((c) => ({
          type: 'message' as const, id: randomUUID(), role: 'tool' as const, content: interruptedResult(c.name), toolCallId: c.id, at: this.iso(), correlationId: input.correlationId,
        })));
        // The model chose the recorded name; one no tool has is counted as "unknown", like an unknown call.
        for (const c of missing) this.deps.events.emit('onToolCall', scopedEvent(scope.scope(), { name: this.deps.registry.get(c.name) ? c.name : 'unknown', ok: false, outcome: 'interrupted', durationMs: 0, at: this.deps.clock.now() }));
        scope.logger.warn({ calls: missing.map((c) => c.name) }, 'tool calls interrupted by a stop or crash got an "interrupted" result');
        return;
      }
    }
  }

  /** A budget stopped the batch: the user is told which, and the run is `budget-limited`. */
  private refused(session: ActiveSession, text: string, checkpoint: RunCheckpoint, background: boolean, scope: BatchScope, iterations: number): BatchResult {
    session.entry.runState = 'budget-limited';
    this.deps.events.emit('onBatchEnd', scopedEvent(scope.scope(), { background, outcome: 'budget-limited', batch: checkpoint.batch, iterations, at: this.deps.clock.now() }));
    return { text, outcome: 'replied' };
  }

  private finish(session: ActiveSession, text: string, checkpoint: RunCheckpoint, background: boolean, scope: BatchScope, iterations: number): BatchResult {
    const entry = session.entry;
    entry.runState = entry.goal ? 'completed' : 'idle';
    this.deps.events.emit('onBatchEnd', scopedEvent(scope.scope(), { background, outcome: 'completed', batch: checkpoint.batch, iterations, at: this.deps.clock.now() }));
    return { text, outcome: 'replied' };
  }

  private atLimit(session: ActiveSession, checkpoint: RunCheckpoint, background: boolean, message: InboundMessage, scope: BatchScope, max: number, said: SaidText): BatchResult {
    const entry = session.entry;
    const limits = this.deps.config.backgroundExecution;
    const goalRun = limits.enabled && Boolean(entry.goal) && !message.ephemeral;
    const emit = (outcome: 'continuing' | 'budget-limited') =>
      this.deps.events.emit('onBatchEnd', scopedEvent(scope.scope(), { background, outcome, batch: checkpoint.batch, iterations: max, at: this.deps.clock.now() }));
    if (goalRun && checkpoint.batch >= limits.maxBatchesPerGoal) {
      entry.runState = 'budget-limited';
      emit('budget-limited');
      this.deps.events.emit('onRefusal', { reason: 'run_budget', correlationId: checkpoint.correlationId, channel: message.channel, sessionKey: entry.key, at: this.deps.clock.now() });
      scope.logger.info({ budget: 'batches', checkpoint }, 'goal run stopped at maxBatchesPerGoal');
      return { text: said.with(batchLimitText('budget-limited', { max, batch: checkpoint.batch, maxBatches: limits.maxBatchesPerGoal, goal: entry.goal })), outcome: 'replied' };
    }
    entry.runState = 'continuing';
    emit('continuing');
    if (!goalRun) return { text: said.with(batchLimitText('stopped', { max, batch: checkpoint.batch, maxBatches: limits.maxBatchesPerGoal })), outcome: 'replied' };
    // The first time a goal's work outgrows a batch the user hears it goes on; later batches stay quiet.
    const text = background ? said.with('') : said.with(batchLimitText('background', { max, batch: checkpoint.batch, maxBatches: limits.maxBatchesPerGoal, goal: entry.goal }));
    return { text, outcome: 'replied', continuation: { deliverTo: entry.goalTarget ?? entry.deliveryTarget } };
  }

  private assistant(content: string, correlationId: string): TranscriptMessage {
    return { type: 'message', id: randomUUID(), role: 'assistant', content, at: this.iso(), correlationId };
  }

  private iso(): string {
    return new Date(this.deps.clock.now()).toISOString();
  }
}

/** Every key of `T`, optional ones too (their values may be undefined): an object written out field by field misses none. */
type EveryField<T> = { [K in keyof Required<T>]: T[K] };

/**
 * The input of a batch: the turn's, with the text it runs on (a reset trigger's rest) and the run state before
 * it. Written out rather than `{ ...input, priorRunState }` (see scopedEvent in turn-events.ts).
 */
export function batchInputOf(input: TurnInput, text: string, priorRunState: SessionEntry['runState']): TurnInput {
  return {
    message: { ...input.message, text }, sessionKey: input.sessionKey, correlationId: input.correlationId, signal: input.signal, onDelta: input.onDelta,
    groupContext: input.groupContext, logger: input.logger, clientSignal: input.clientSignal, lendSlot: input.lendSlot, replayed: input.replayed, priorRunState,
    joined: input.joined, takeSteered: input.takeSteered, sendFile: input.sendFile,
  } satisfies EveryField<TurnInput>;
}

/**
 * Where a replayed delivery stands in the transcript: its user entry, its final answer if one was written, or
 * `overtaken` when a later user entry (another turn that ran with it in its history) follows it. The whole
 * transcript is searched: a long tool loop must not push the entry out of sight and get it appended again.
 */
function findRecorded(history: readonly TranscriptEntry[], sourceId: string): { answer?: string; overtaken?: true } | undefined {
  for (let i = history.length - 1; i >= 0; i--) {
    const e = history[i] as TranscriptEntry;
    if (e.type !== 'message' || e.role !== 'user' || e.sourceId !== sourceId) continue;
    for (let j = i + 1; j < history.length; j++) {
      const after = history[j] as TranscriptEntry;
      if (after.type !== 'message') continue;
      if (after.role === 'user') return { overtaken: true };
      if (after.role === 'assistant' && !after.toolCalls?.length) return { answer: after.content.trim() || '(no answer)' };
    }
    return {};
  }
  return undefined;
}

/**
 * Whether a batch goes on with its goal's counters (batches, tool calls, tokens, start): the same goal, and a
 * run that was not ended by a budget or by reaching the goal. A user message in between and "continue" after
 * /stop keep them; a new /goal clears the checkpoint, and "continue" after a budget stop starts fresh (as the
 * budget message promises).
 */
function ongoingGoal(previous: RunCheckpoint | undefined, entry: SessionEntry, background: boolean, prior: SessionEntry['runState'] | undefined): previous is RunCheckpoint {
  if (!previous || !entry.goal || previous.goal !== entry.goal) return false;
  return background || (prior !== 'budget-limited' && prior !== 'completed');
}

/** The result of a call the goal's tool-call budget left unrun. */
function toolBudgetResult(max: number): string {
  return `Error: not run: the goal reached its tool-call budget (${formatCount(max)} calls, backgroundExecution.maxToolCalls).`;
}

/**
 * The text a batch showed while it streamed: answers that came with tool calls are part of the reply, with the
 * same blank line between them in the stream and in the reply, so what streamed is what the reply says.
 */
class SaidText {
  private readonly parts: string[] = [];
  private streamed = false;
  private fresh = true;
  readonly onDelta: ((text: string) => void) | undefined;

  constructor(onDelta: ((text: string) => void) | undefined) {
    this.onDelta = onDelta && ((text) => {
      if (!text) return;
      if (this.fresh && this.streamed) onDelta('\n\n');
      this.fresh = false;
      this.streamed = true;
      onDelta(text);
    });
  }

  /** An answer that came with tool calls; the next call's text starts a new paragraph. */
  add(content: string): void {
    // Only a streamed reply carries them: a platform chat gets the final answer as before.
    if (this.onDelta && content.trim()) this.parts.push(content.trim());
    this.fresh = true;
  }

  /** The reply: what was said along the way, then `last`. */
  with(last: string): string {
    return [...this.parts, last].filter(Boolean).join('\n\n');
  }
}
