import { randomUUID } from 'node:crypto';
import type { AgentConfig, ResolvedConfig } from '../config/resolved.ts';
import type { TokenUsage, TurnResult } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import { ChosenModelError, isAbortError, TurnAbortedError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage, OutboundMessage } from '../core/message.ts';
import { FailoverProvider, isFailoverError } from '../providers/failover.ts';
import { ModelChains, type ResolvedModel } from '../providers/model-chains.ts';
import type { ProviderRegistry } from '../providers/registry.ts';
import type { ProviderResponse, ToolSchema } from '../providers/types.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { ActiveSession, SessionInit, SessionManager } from '../sessions/manager.ts';
import { evaluateReset, resolveResetPolicy, type ResetPolicy, type ResetReason } from '../sessions/reset.ts';
import type { TranscriptEntry, TranscriptStore } from '../sessions/transcript.ts';
import { SessionHistory } from './session-history.ts';
import type { ToolPolicy } from '../config/schema.ts';
import { ToolRegistry } from '../tools/registry.ts';
import { batchInputOf, BatchRunner } from './batch-runner.ts';
import { registerBuiltinCommands } from './commands/builtin-commands.ts';
import { describeResetPolicy, hostZone, resetNotice } from './commands/reset-text.ts';
import { CommandRegistry, matchResetTrigger, type CommandServices } from './commands/commands.ts';
import { registerContextCommands } from './commands/context-commands.ts';
import { ContextEngine, syntheticMessage, type CompactionOutcome, type ContextEngineDeps } from './context/context-engine.ts';
import { MEMORY_WRITE } from './context/memory-flush.ts';
import { ProviderCaller, type ProviderCallRequest } from './provider-call.ts';
import { goalRunContinues, RunSettler } from './run-settle.ts';
import { ephemeralSessionOf, sessionInitOf } from './session-init.ts';
import { isBackgroundKind, sourceIdOf } from './runs.ts';
import { toolSchemaTokens } from '../tokens/tokens.ts';
import { markScheduledRun, scopedEvent, TurnEvents, zeroUsage, type TurnScope } from './turn-events.ts';
import type { TurnInput } from './turn-input.ts';
import type { MediaIntake } from './media-intake.ts';
import type { MediaStore } from '../media/media-store.ts';

/** What the runtime needs from the gateway about lanes (for /stop and /status). */
export interface LaneControl {
  stop(key: string): boolean;
  depth(key: string): number;
  isRunning(key: string): boolean;
  /**
   * Cluster mode: the session's work on any replica (`running`: a replica holds its lock; `waiting`: its accepted
   * messages not done, the running one included).
   */
  anywhere?(key: string): Promise<{ running: boolean; waiting: number }>;
}

/** Options of {@link AgentRuntime}. */
export interface RuntimeOptions {
  config: ResolvedConfig;
  sessions: SessionManager;
  transcripts: TranscriptStore;
  providers: ProviderRegistry;
  clock: Clock;
  logger: Logger;
  events?: TurnEvents;
  /** The tools sessions may call; none when absent. */
  tools?: ToolRegistry;
  /** Fetches and prepares attachments before a turn (SPEC §15); absent: attachments are listed. */
  media?: MediaIntake;
  /** Where images of user entries are kept, for requests to models that see. */
  mediaStore?: MediaStore;
  /** Models, fallbacks and keys (SPEC §18); default: built from `config.providers` and `providers`. */
  models?: ModelChains;
}

/**
 * The shared agent runtime: admit the session → reset check → chat command or LLM turn (system prompt +
 * transcript history, tool loop) → transcript → reply. Emits turn events; never calls accounting directly.
 */
export class AgentRuntime {
  readonly commands = new CommandRegistry();
  readonly events: TurnEvents;
  /** Prompt assembly, token calibration, compaction, memory flush and pruning (SPEC §5). */
  readonly contextEngine: ContextEngine;
  private readonly options: RuntimeOptions;
  /** The tools sessions may call (built-in, MCP). */
  readonly tools: ToolRegistry;
  private readonly batches: BatchRunner;
  private readonly caller: ProviderCaller;
  private readonly settler: RunSettler;
  private lanes: LaneControl = { stop: () => false, depth: () => 0, isRunning: () => false };
  private readonly histories: SessionHistory;
  /** A turn's own model (a heartbeat's cheaper `model`, SPEC §17), for the session entry it runs on. */
  private readonly turnModels = new WeakMap<SessionEntry, string>();

  /** The model chains sessions run on (SPEC §18). */
  readonly models: ModelChains;

  constructor(options: RuntimeOptions) {
    this.options = options;
    this.histories = new SessionHistory(options.transcripts);
    this.models = options.models ?? new ModelChains({ providers: options.config.providers, registry: options.providers, clock: options.clock });
    this.events = options.events ?? new TurnEvents(options.logger);
    this.settler = new RunSettler({ sessions: options.sessions, events: this.events, clock: options.clock, logger: options.logger });
    this.tools = options.tools ?? new ToolRegistry({ timeoutMs: options.config.tools.timeoutSeconds * 1000, maxResultChars: options.config.tools.maxResultChars });
    registerBuiltinCommands(this.commands, { budgetBelowFixedCost: (e) => this.contextEngine.budgetBelowFixedCost(e) });
    const timezoneOf = (e: SessionEntry) => this.resetPolicyOf(e).timezone ?? hostZone();
    this.contextEngine = new ContextEngine({
      config: options.config, clock: options.clock, logger: options.logger,
      historyOf: (s) => this.historyOf(s), appendEntries: (s, e) => this.appendEntries(s, e),
      callProvider: (request) => this.callProvider(request), modelOf: (e) => this.modelOf(e), agentFor: (id) => this.agentFor(id),
      toolSchemas: (e) => this.toolSchemas(e), timezoneOf,
      memoryFlushTool: this.memoryFlushTool(timezoneOf), mediaStore: options.mediaStore,
    });
    this.caller = new ProviderCaller({ clock: options.clock, events: this.events, budgetOf: (agentId) => this.agentFor(agentId).tokenBudget });
    this.batches = new BatchRunner({
      config: options.config, clock: options.clock, events: this.events, contextEngine: this.contextEngine, registry: this.tools,
      historyOf: (s) => this.historyOf(s), appendEntries: (s, e, later) => this.appendEntries(s, e, later),
      persist: (entry, logger) => this.settler.persist(entry, logger), toolSchemas: (e, ephemeral) => this.toolSchemas(e, ephemeral),
      toolsArriving: (e, ephemeral, signal, logger) => (ephemeral ? undefined : this.tools.arrivals.wait(this.toolPolicyOf(e), { signal, logger })),
      workspaceOf: (e) => this.agentFor(e.agentId).workspace, timezoneOf,
    });
    registerContextCommands(this.commands, this.contextEngine, options.logger);
  }

  /** Connects /stop and /status to the gateway's lanes. */
  attachLanes(lanes: LaneControl): void {
    this.lanes = lanes;
  }

  get config(): ResolvedConfig {
    return this.options.config;
  }

  agentFor(agentId: string | undefined): AgentConfig {
    const agents = this.options.config.agents;
    return agents.find((a) => a.id === agentId) ?? (agents[0] as AgentConfig);
  }

  /** Model, provider (a failover chain when there are fallbacks or more keys) and window a session's next turn uses. */
  modelOf(entry: SessionEntry): ResolvedModel {
    return this.models.resolve(this.agentFor(entry.agentId), { override: entry.overrides.model, turnModel: this.turnModels.get(entry) });
  }

  resetPolicyOf(entry: SessionEntry): ResetPolicy {
    return resolveResetPolicy(this.options.config.session, {
      channel: entry.channel, chatType: entry.chatType, isThread: Boolean(entry.threadId), timezone: entry.overrides.timezone,
    });
  }

  /** The tool policy of a session: its `/tools` preset over its agent's policy. */
  toolPolicyOf(entry: SessionEntry): ToolPolicy {
    const agent = this.agentFor(entry.agentId).tools;
    const preset = entry.overrides.toolPreset as ToolPolicy['preset'] | undefined;
    return preset && preset !== agent.preset ? { ...agent, preset } : agent;
  }

  /** The schemas a session's requests carry (one-off API sessions get none). */
  toolSchemas(entry: SessionEntry, ephemeral?: boolean): ToolSchema[] {
    return ephemeral ? [] : this.tools.schemasFor(this.toolPolicyOf(entry));
  }

  /** Whether the message is a command answered ahead of the queue (`/stop`, `/status`). */
  isImmediate(text: string): boolean {
    return Boolean(this.commands.match(text)?.command.immediate);
  }

  /** Runs one turn. Never leaves the session held; errors other than aborts propagate to the gateway. */
  async runTurn(input: TurnInput): Promise<TurnResult> {
    const { message, correlationId } = input;
    const logger = input.logger ?? this.options.logger.child({ correlationId, sessionKey: input.sessionKey });
    const session = message.ephemeral ? this.ephemeralSession(this.initOf(message, input.sessionKey)) : await this.options.sessions.acquire(this.initOf(message, input.sessionKey));
    const started = this.options.clock.now();
    const parentCorrelationId = message.internal?.parentCorrelationId;
    const scope = (): TurnScope => {
      const fields: TurnScope = { correlationId, sessionKey: session.key, sessionId: session.entry.sessionId, channel: message.channel, agentId: session.entry.agentId };
      if (parentCorrelationId) fields.parentCorrelationId = parentCorrelationId;
      return markScheduledRun(fields, message.internal);
    };
    const usage = zeroUsage();
    const state = { estimated: false, model: undefined as string | undefined };
    let outcome: TurnResult['outcome'] = 'failed';
    // A closed web page never cancels its turn: the answer is kept and reaches the user's open pages
    // (/webchat/events); nor does a client going away stop a run toward a goal. An API caller that closes its
    // connection does cancel, as with OpenAI.
    const detached = message.channel === 'webchat' || (this.options.config.backgroundExecution.enabled && Boolean(session.entry.goal));
    const signal = input.clientSignal && !detached ? AbortSignal.any([input.signal, input.clientSignal]) : input.signal;
    const turnInput: TurnInput = { ...input, signal };
    this.events.emit('onTurnStart', scopedEvent(scope(), { at: started }));
    try {
      const result = await this.turn(session, turnInput, logger, usage, state, scope);
      outcome = result.outcome;
      const turnResult: TurnResult = {
        replies: result.replies, outcome: result.outcome, sessionKey: session.key, sessionId: session.entry.sessionId, correlationId, usage, usageEstimated: state.estimated, model: state.model,
      };
      if (result.continuation) turnResult.continuation = result.continuation;
      return turnResult;
    } catch (error) {
      if (isAbortError(error) || signal.aborted) {
        outcome = 'stopped';
        throw new TurnAbortedError(signal.reason instanceof Error ? signal.reason.message : 'stopped');
      }
      throw error;
    } finally {
      await this.settler.settleTurn(session, message, signal, outcome, logger, scope);
      if (!message.ephemeral) this.options.sessions.release(session);
      this.events.emit('onTurnEnd', scopedEvent(scope(), { outcome, usage, durationMs: this.options.clock.now() - started, at: this.options.clock.now() }));
    }
  }

  /** Answers `/stop` or `/status` at once, outside the session's lane. */
  async runImmediate(message: InboundMessage, sessionKey: string, correlationId: string): Promise<TurnResult> {
    const match = this.commands.match(message.text);
    if (!match) throw new Error('not an immediate command');
    const session = await this.options.sessions.acquire(this.initOf(message, sessionKey));
    try {
      const text = await match.command.run({ session, message, args: match.args, services: this.services(), correlationId, signal: new AbortController().signal });
      const reply: OutboundMessage = { text, kind: 'command', replyTo: message.id, threadId: message.threadId };
      return { sessionKey, sessionId: session.entry.sessionId, correlationId, replies: [reply], usage: zeroUsage(), usageEstimated: false, outcome: 'command' };
    } finally {
      this.options.sessions.release(session);
    }
  }

  /** Resets a stored session by key (admin API). Returns the new entry, or undefined when the key is unknown. */
  async resetByKey(key: string, reason: 'admin' | 'manual' = 'admin'): Promise<SessionEntry | undefined> {
    const stored = await this.options.sessions.get(key);
    if (!stored) return undefined;
    const session = await this.options.sessions.acquire({ ...stored });
    try {
      await this.options.sessions.reset(session, reason);
      return session.entry;
    } finally {
      this.options.sessions.release(session);
    }
  }

  /** `/stop` for a stored key (admin API): aborts its running turn and pauses its goal run. Undefined when the key is unknown. */
  stopByKey(key: string): Promise<{ entry: SessionEntry; stopped: boolean } | undefined> {
    return this.settler.stopStored(key, () => this.lanes.stop(key));
  }

  /** At start: a run the last process left `running` that nothing resumes ends `failed` (on the session's lane). True when the entry changed. */
  settleStaleRun(key: string): Promise<boolean> {
    return this.settler.settleStale(key);
  }

  /** Compacts a stored session by key (admin API). Undefined when the key is unknown. */
  async compactByKey(key: string, signal: AbortSignal = new AbortController().signal): Promise<{ entry: SessionEntry; outcome: CompactionOutcome } | undefined> {
    const stored = await this.options.sessions.get(key);
    if (!stored) return undefined;
    const session = await this.options.sessions.acquire({ ...stored });
    const correlationId = randomUUID();
    try {
      const message = syntheticMessage(session.entry, '/compact', this.options.clock.now());
      const logger = this.options.logger.child({ correlationId, sessionKey: key });
      const outcome = await this.contextEngine.compactNow(session, { correlationId, signal, message, usage: zeroUsage(), state: { estimated: false }, logger });
      if (outcome.compacted) await this.options.sessions.save(session.entry);
      return { entry: session.entry, outcome };
    } finally {
      this.options.sessions.release(session);
    }
  }

  private async turn(session: ActiveSession, input: TurnInput, logger: Logger, usage: TokenUsage, state: { estimated: boolean; model?: string }, scope: () => TurnScope): Promise<Pick<TurnResult, 'replies' | 'outcome' | 'continuation'>> {
    const { message } = input;
    const now = this.options.clock.now();
    const reply = (text: string, kind: OutboundMessage['kind'] = 'reply', notice?: string): OutboundMessage =>
      ({ text, kind, notice, replyTo: message.id, threadId: message.threadId });
    let notice: string | undefined;
    if (this.options.media && !message.internal) {
      // Before anything reads the text: a voice note's transcript is its text, so a spoken command works.
      const agent = this.agentFor(session.entry.agentId);
      for (const m of [message, ...(input.joined ?? [])]) {
        if (m.attachments.length) await this.options.media.prepare(m, { agent, signal: input.signal, logger, correlationId: input.correlationId });
      }
    }
    let text = message.text;

    if (message.internal) {
      // Internal messages are never commands or reset triggers: a model cannot /reset or /stop another session.
      if (isBackgroundKind(message.internal.kind) && !goalRunContinues(session.entry, this.options.config.backgroundExecution.enabled)) {
        logger.info({ runState: session.entry.runState, kind: message.internal.kind }, 'background batch skipped: the run was stopped, finished or its goal cleared');
        return { outcome: 'skipped', replies: [] };
      }
    } else {
      const trigger = matchResetTrigger(text, this.options.config.session.resetTriggers);
      if (trigger) {
        if (input.replayed && await this.resetBy(session, message)) {
          logger.info({ sessionId: session.entry.sessionId }, 'replayed reset trigger: this delivery already reset the session, which is not reset again');
        } else {
          await this.resetSession(session, 'manual', message.ephemeral);
          logger.info({ sessionId: session.entry.sessionId }, 'session reset by trigger');
        }
        if (!trigger.rest) {
          await this.settler.finishEntry(session, message, input.logger, now, false);
          return { outcome: 'command', replies: [reply(`New session started (${session.entry.sessionId.slice(0, 8)}). What shall we talk about?`, 'command')] };
        }
        text = trigger.rest;
      } else if (session.entry.messageCount > 0) {
        const reason = evaluateReset(this.resetPolicyOf(session.entry), session.entry.updatedAt, now);
        if (reason) {
          await this.resetSession(session, reason, message.ephemeral);
          logger.info({ reason, sessionId: session.entry.sessionId }, 'session reset by policy');
          if (this.options.config.session.notifyOnReset) notice = resetNotice(reason, this.resetPolicyOf(session.entry));
        }
      }
      const command = this.commands.match(text);
      if (command) {
        const answer = await command.command.run({ session, message, args: command.args, services: this.services(), correlationId: input.correlationId, signal: input.signal });
        await this.settler.finishEntry(session, message, input.logger, now, false);
        return { outcome: 'command', replies: [reply(answer, 'command', notice)] };
      }
    }

    const entry = session.entry;
    const priorRunState = entry.runState;
    entry.runState = 'running';
    if (!message.ephemeral && entry.messageCount === 0) {
      // The entry names the new transcript before the file exists, so a crash never leaves a transcript no entry points to.
      await this.settler.persist(entry, logger);
      await this.options.transcripts.create(entry.sessionId, entry.key, new Date(now));
    }
    if (message.internal?.model) this.turnModels.set(entry, message.internal.model);
    let result: Awaited<ReturnType<BatchRunner['run']>>;
    let ran = false;
    try {
      result = await this.batches.run(session, batchInputOf(input, text, priorRunState), { usage, state, logger, scope });
      ran = true;
    } finally {
      this.turnModels.delete(entry);
      // The user's message reaches the transcript even when the batch failed before any other append.
      await this.histories.flush(session).catch((err: unknown) => {
        if (ran) throw err;
        logger.error({ err }, 'could not write the message of a failed turn to its transcript');
      });
    }
    await this.settler.finishEntry(session, message, input.logger, this.options.clock.now(), true);
    if (result.outcome === 'skipped') return { outcome: 'skipped', replies: [] };
    return { outcome: 'replied', replies: result.text ? [reply(result.text, 'reply', notice)] : [], ...(result.continuation ? { continuation: result.continuation } : {}) };
  }

  /**
   * Whether a replayed reset trigger already reset the session before a crash: the session was reset by hand and
   * holds nothing, or its first message is the trigger's rest from this very delivery.
   */
  private async resetBy(session: ActiveSession, message: InboundMessage): Promise<boolean> {
    if (session.entry.lastResetReason !== 'manual') return false;
    const first = (await this.historyOf(session)).find((e) => e.type === 'message');
    return !first || (first.type === 'message' && first.role === 'user' && first.sourceId === sourceIdOf(message));
  }

  /** `memory_write` for the silent flush before compaction (SPEC §5, §11). */
  private memoryFlushTool(timezoneOf: (e: SessionEntry) => string): ContextEngineDeps['memoryFlushTool'] {
    const policy: ToolPolicy = { preset: 'none', allow: [MEMORY_WRITE], deny: [] };
    const registry = this.tools;
    if (!registry.get(MEMORY_WRITE)) return undefined;
    const enabled = registry.schemasFor(policy);
    return {
      schema: enabled[0] as ToolSchema,
      run: (call, session, scope) => registry.execute(call, enabled, {
        entry: session.entry, message: scope.message, correlationId: scope.correlationId, signal: scope.signal, logger: scope.logger,
        workspace: this.agentFor(session.entry.agentId).workspace, timezone: timezoneOf(session.entry), now: () => this.options.clock.now(),
        purpose: 'memory-flush', lendSlot: (work) => work(),
      }),
    };
  }

  /** One LLM call with accounting: usage (or a tokenizer estimate), session totals, the budget, and the llm-call event. */
  async callProvider(request: ProviderCallRequest): Promise<ProviderResponse> {
    try {
      return await this.caller.call(request);
    } catch (error) {
      // A model chosen with /model has no fallbacks: its failure is told as such (SPEC §18).
      const { provider } = request;
      if (provider instanceof FailoverProvider && provider.userChosen && isFailoverError(error)) throw new ChosenModelError(`${provider.id}/${provider.model}`, error);
      throw error;
    }
  }

  /** The current session's transcript (memory for one-off sessions), entries waiting for a write included. */
  historyOf(session: ActiveSession): Promise<TranscriptEntry[]> {
    return this.histories.read(session);
  }

  /** Appends to the current session's transcript; with `later`, with the turn's next append (see {@link SessionHistory}). */
  appendEntries(session: ActiveSession, entries: TranscriptEntry[], later = false): Promise<void> {
    return this.histories.append(session, entries, later);
  }

  private async resetSession(session: ActiveSession, reason: ResetReason | 'manual', ephemeral?: boolean): Promise<void> {
    if (ephemeral) {
      this.histories.startEphemeral(session);
      session.entry = { ...session.entry, sessionId: randomUUID(), messageCount: 0, lastResetReason: reason };
      return;
    }
    await this.options.sessions.reset(session, reason);
  }

  /** A session's turn here, and in cluster mode anywhere (as `/admin/runs` counts it); this replica's alone when that read fails. */
  private async turnState(key: string): Promise<{ running: boolean; queued: number }> {
    const here = { running: this.lanes.isRunning(key), queued: this.lanes.depth(key) };
    const there = await this.lanes.anywhere?.(key).catch((err: unknown) => {
      this.options.logger.warn({ err, sessionKey: key }, 'could not read the session\'s work on other replicas; /status shows this replica\'s');
      return undefined;
    });
    if (!there) return here;
    const running = here.running || there.running;
    return { running, queued: Math.max(here.queued, there.waiting - (running ? 1 : 0)) };
  }

  private services(): CommandServices {
    return {
      config: this.options.config,
      now: () => this.options.clock.now(),
      modelOf: (entry) => this.modelOf(entry),
      save: (entry) => this.options.sessions.save(entry),
      stopTurn: (key) => this.lanes.stop(key),
      turnState: (key) => this.turnState(key),
      describeReset: (entry) => describeResetPolicy(this.resetPolicyOf(entry)),
      toolsOf: (entry) => {
        const schemas = this.toolSchemas(entry);
        const model = this.modelOf(entry).model;
        return { preset: this.toolPolicyOf(entry).preset, names: schemas.map((t) => t.name), tokens: schemas.reduce((sum, t) => sum + toolSchemaTokens(t, model), 0) };
      },
    };
  }

  private initOf(message: InboundMessage, key: string): SessionInit {
    return sessionInitOf(message, key);
  }

  private ephemeralSession(init: SessionInit): ActiveSession {
    const session = ephemeralSessionOf(init, this.options.clock.now());
    this.histories.startEphemeral(session);
    return session;
  }
}
