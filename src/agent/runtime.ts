import { randomUUID } from 'node:crypto';
import type { AgentConfig, ResolvedConfig } from '../config/resolved.ts';
import type { TokenUsage, TurnResult } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import { isAbortError, ProviderError, TurnAbortedError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import { targetOf, type InboundMessage, type OutboundMessage } from '../core/message.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import { requireProvider, type ProviderRegistry } from '../providers/registry.ts';
import type { Provider, ProviderResponse, ToolSchema } from '../providers/types.ts';
import { emptyTokens, type SessionEntry } from '../sessions/entry.ts';
import type { ActiveSession, SessionInit, SessionManager } from '../sessions/manager.ts';
import { evaluateReset, resolveResetPolicy, type ResetPolicy, type ResetReason } from '../sessions/reset.ts';
import type { TranscriptEntry, TranscriptMessage, TranscriptStore } from '../sessions/transcript.ts';
import { registerBuiltinCommands } from './builtin-commands.ts';
import { describeResetPolicy, hostZone, resetNotice } from './reset-text.ts';
import { userContent } from './user-content.ts';
import { CommandRegistry, matchResetTrigger, type CommandServices } from './commands.ts';
import type { BuiltContext } from './context.ts';
import { registerContextCommands } from './context-commands.ts';
import { ContextEngine, syntheticMessage, type CompactionOutcome } from './context-engine.ts';
import { ContextOverflowError } from './compaction.ts';
import { countTokens } from './tokens.ts';
import { addUsage, TurnEvents, zeroUsage, type LlmCallKind, type TurnScope } from './turn-events.ts';

/** A message kept from a group chat without a run, given to the next run as context. */
export interface GroupContextItem {
  name: string;
  text: string;
  at: number;
}

/** One turn to run. */
export interface TurnInput {
  message: InboundMessage;
  sessionKey: string;
  correlationId: string;
  signal: AbortSignal;
  onDelta?: (text: string) => void;
  groupContext?: GroupContextItem[];
  logger?: Logger;
}

/** What the runtime needs from the gateway about lanes (for /stop and /status). */
export interface LaneControl {
  stop(key: string): boolean;
  depth(key: string): number;
  isRunning(key: string): boolean;
}

/** Runs tools the model asks for. The registry is empty until tools land. */
export interface ToolExecutor {
  schemas(entry: SessionEntry): ToolSchema[];
  execute(name: string, args: string, context: { session: ActiveSession; signal: AbortSignal }): Promise<string>;
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
  tools?: ToolExecutor;
}

const NO_TOOLS: ToolExecutor = {
  schemas: () => [],
  execute: async (name) => `Unknown tool "${name}".`,
};

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
  private readonly tools: ToolExecutor;
  private lanes: LaneControl = { stop: () => false, depth: () => 0, isRunning: () => false };
  private readonly ephemeralHistories = new WeakMap<ActiveSession, TranscriptEntry[]>();

  constructor(options: RuntimeOptions) {
    this.options = options;
    this.events = options.events ?? new TurnEvents(options.logger);
    this.tools = options.tools ?? NO_TOOLS;
    registerBuiltinCommands(this.commands);
    this.contextEngine = new ContextEngine({
      config: options.config, clock: options.clock, logger: options.logger,
      historyOf: (s) => this.historyOf(s), appendEntries: (s, e) => this.appendEntries(s, e),
      callProvider: (...args) => this.callProvider(...args), modelOf: (e) => this.modelOf(e), agentFor: (id) => this.agentFor(id),
      toolSchemas: (e) => this.tools.schemas(e), timezoneOf: (e) => this.resetPolicyOf(e).timezone ?? hostZone(),
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

  /** Model, provider and window a session's next turn uses. */
  modelOf(entry: SessionEntry): { providerId: string; model: string; contextWindow: number; provider: Provider } {
    const agent = this.agentFor(entry.agentId);
    const provider = requireProvider(this.options.providers, agent.providerId);
    return { providerId: provider.id, model: entry.overrides.model ?? agent.model, contextWindow: provider.contextWindow, provider };
  }

  resetPolicyOf(entry: SessionEntry): ResetPolicy {
    return resolveResetPolicy(this.options.config.session, {
      channel: entry.channel, chatType: entry.chatType, isThread: Boolean(entry.threadId), timezone: entry.overrides.timezone,
    });
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
    const scope = (): TurnScope => ({ correlationId, sessionKey: session.key, sessionId: session.entry.sessionId, channel: message.channel, agentId: session.entry.agentId });
    const usage = zeroUsage();
    const state = { estimated: false, model: undefined as string | undefined };
    let outcome: TurnResult['outcome'] = 'failed';
    this.events.emit('onTurnStart', { ...scope(), at: started });
    try {
      const result = await this.turn(session, input, logger, usage, state);
      outcome = result.outcome;
      return { ...result, sessionKey: session.key, sessionId: session.entry.sessionId, correlationId, usage, usageEstimated: state.estimated, model: state.model };
    } catch (error) {
      if (isAbortError(error) || input.signal.aborted) {
        outcome = 'stopped';
        throw new TurnAbortedError(input.signal.reason instanceof Error ? input.signal.reason.message : 'stopped');
      }
      throw error;
    } finally {
      if (session.entry.runState === 'running') {
        session.entry.runState = outcome === 'failed' ? 'failed' : 'idle';
        if (!message.ephemeral) await this.options.sessions.save(session.entry).catch((err: unknown) => logger.error({ err }, 'could not persist the session entry'));
      }
      if (!message.ephemeral) this.options.sessions.release(session);
      this.events.emit('onTurnEnd', { ...scope(), outcome, usage, durationMs: this.options.clock.now() - started, at: this.options.clock.now() });
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

  private async turn(session: ActiveSession, input: TurnInput, logger: Logger, usage: TokenUsage, state: { estimated: boolean; model?: string }): Promise<Pick<TurnResult, 'replies' | 'outcome'>> {
    const { message } = input;
    const now = this.options.clock.now();
    const reply = (text: string, kind: OutboundMessage['kind'] = 'reply', notice?: string): OutboundMessage =>
      ({ text, kind, notice, replyTo: message.id, threadId: message.threadId });
    let text = message.text;
    let notice: string | undefined;

    const trigger = matchResetTrigger(text, this.options.config.session.resetTriggers);
    if (trigger) {
      await this.resetSession(session, 'manual', message.ephemeral);
      logger.info({ sessionId: session.entry.sessionId }, 'session reset by trigger');
      if (!trigger.rest) {
        await this.finishEntry(session, input, now, false);
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
      await this.finishEntry(session, input, now, false);
      return { outcome: 'command', replies: [reply(answer, 'command', notice)] };
    }

    const content = await this.llmTurn(session, { ...input, message: { ...message, text } }, logger, usage, state);
    return { outcome: 'replied', replies: [reply(content, 'reply', notice)] };
  }

  private async llmTurn(session: ActiveSession, input: TurnInput, logger: Logger, usage: TokenUsage, state: { estimated: boolean; model?: string }): Promise<string> {
    const { message, signal } = input;
    const entry = session.entry;
    const persist = !message.ephemeral;
    entry.runState = 'running';
    if (persist && entry.messageCount === 0) await this.options.transcripts.create(entry.sessionId, entry.key, new Date(this.options.clock.now()));
    const userEntry: TranscriptMessage = {
      type: 'message', id: randomUUID(), role: 'user', content: userContent(message, input.groupContext),
      at: new Date(this.options.clock.now()).toISOString(), correlationId: input.correlationId,
      ...(message.chatType !== 'direct' && message.sender.name ? { name: message.sender.name } : {}),
    };
    await this.appendEntries(session, [userEntry]);
    const maxIterations = this.options.config.agentDefaults.maxIterationsPerBatch;
    let finalText = '';
    const turnStartedAt = this.options.clock.now();
    const turnState = {};
    for (let iteration = 0; iteration < maxIterations; iteration++) {
      if (signal.aborted) throw new TurnAbortedError();
      const tools = this.tools.schemas(entry);
      let response: ProviderResponse;
      try {
        response = await this.contextEngine.complete(session, { ...input, usage, state, logger, tools, turnStartedAt, turnState, ephemeral: message.ephemeral });
      } catch (error) {
        if (!(error instanceof ContextOverflowError)) throw error;
        finalText = error.message;
        await this.appendEntries(session, [{ type: 'message', id: randomUUID(), role: 'assistant', content: finalText, at: new Date(this.options.clock.now()).toISOString(), correlationId: input.correlationId }]);
        break;
      }
      if (response.toolCalls.length === 0) {
        finalText = response.content.trim() || '(no answer)';
        await this.appendEntries(session, [{ type: 'message', id: randomUUID(), role: 'assistant', content: response.content, at: new Date(this.options.clock.now()).toISOString(), correlationId: input.correlationId }]);
        break;
      }
      const toolEntries: TranscriptMessage[] = [{ type: 'message', id: randomUUID(), role: 'assistant', content: response.content, toolCalls: response.toolCalls, at: new Date(this.options.clock.now()).toISOString(), correlationId: input.correlationId }];
      for (const call of response.toolCalls) {
        const t0 = this.options.clock.now();
        let result: string;
        let ok = true;
        try {
          result = await this.tools.execute(call.name, call.arguments, { session, signal });
        } catch (error) {
          if (signal.aborted) throw error;
          ok = false;
          result = `Tool error: ${(error as Error).message}`;
        }
        this.events.emit('onToolCall', { correlationId: input.correlationId, sessionKey: session.key, sessionId: entry.sessionId, channel: message.channel, agentId: entry.agentId, name: call.name, ok, durationMs: this.options.clock.now() - t0, at: this.options.clock.now() });
        toolEntries.push({ type: 'message', id: randomUUID(), role: 'tool', content: result, toolCallId: call.id, at: new Date(this.options.clock.now()).toISOString(), correlationId: input.correlationId });
      }
      await this.appendEntries(session, toolEntries);
      if (iteration === maxIterations - 1) finalText = `I stopped after ${maxIterations} tool steps without a final answer. Say "continue" to let me go on.`;
    }
    await this.finishEntry(session, input, this.options.clock.now(), true);
    return finalText;
  }

  /** One LLM call with accounting: usage (or a tokenizer estimate), session totals, and the llm-call event. */
  async callProvider(
    session: ActiveSession, provider: Provider, model: string, context: BuiltContext, kind: LlmCallKind,
    input: Pick<TurnInput, 'correlationId' | 'signal' | 'onDelta' | 'message'>, usage: TokenUsage, state: { estimated: boolean; model?: string }, logger: Logger, tools: ToolSchema[] = [],
  ): Promise<ProviderResponse> {
    const entry = session.entry;
    const t0 = this.options.clock.now();
    const scope = { correlationId: input.correlationId, sessionKey: session.key, sessionId: entry.sessionId, channel: input.message.channel, agentId: entry.agentId };
    let response: ProviderResponse;
    try {
      response = await provider.complete(
        { model, messages: context.messages, tools, correlationId: input.correlationId, reasoningEffort: entry.overrides.reasoningEffort },
        { signal: input.signal, onDelta: kind === 'turn' ? input.onDelta : undefined },
      );
    } catch (error) {
      const code = error instanceof ProviderError ? error.code : 'PROVIDER_FAILED';
      this.events.emit('onLlmCall', { ...scope, kind, providerId: provider.id, modelId: model, usage: zeroUsage(), isEstimated: false, estimatedInputTokensByComponent: context.components, retries: (error as { retries?: number }).retries ?? 0, durationMs: this.options.clock.now() - t0, error: code, at: this.options.clock.now() });
      if (!isAbortError(error)) logger.warn({ err: error, providerId: provider.id, model }, 'LLM call failed');
      throw error;
    }
    entry.lastRequestAt = this.options.clock.now();
    const estimated = !response.usage;
    const callUsage: TokenUsage = response.usage ?? {
      inputTokens: context.tokens, outputTokens: countTokens(response.content, model) + response.toolCalls.reduce((n, c) => n + countTokens(c.arguments, model), 0),
      cacheReadTokens: 0, cacheWriteTokens: 0,
    };
    if (estimated) state.estimated = true;
    state.model = response.model;
    addUsage(usage, callUsage);
    entry.tokens = {
      input: entry.tokens.input + callUsage.inputTokens,
      output: entry.tokens.output + callUsage.outputTokens,
      cacheRead: entry.tokens.cacheRead + callUsage.cacheReadTokens,
      cacheWrite: entry.tokens.cacheWrite + callUsage.cacheWriteTokens,
    };
    this.events.emit('onLlmCall', { ...scope, kind, providerId: provider.id, modelId: response.model || model, usage: callUsage, isEstimated: estimated, estimatedInputTokensByComponent: context.components, retries: response.retries, durationMs: this.options.clock.now() - t0, at: this.options.clock.now() });
    return response;
  }

  /** The current session's transcript (memory for one-off sessions). */
  async historyOf(session: ActiveSession): Promise<TranscriptEntry[]> {
    const ephemeral = this.ephemeralHistories.get(session);
    if (ephemeral) return ephemeral.slice();
    return session.entry.messageCount === 0 ? [] : this.options.transcripts.read(session.entry.sessionId);
  }

  /** Appends to the current session's transcript. */
  async appendEntries(session: ActiveSession, entries: TranscriptEntry[]): Promise<void> {
    const ephemeral = this.ephemeralHistories.get(session);
    if (ephemeral) ephemeral.push(...entries);
    else await this.options.transcripts.append(session.entry.sessionId, entries);
    session.entry.messageCount += entries.filter((e) => e.type === 'message').length;
  }

  private async finishEntry(session: ActiveSession, input: TurnInput, now: number, activity: boolean): Promise<void> {
    const entry = session.entry;
    if (activity) entry.updatedAt = now;
    entry.runState = 'idle';
    if (input.message.sender.name && input.message.chatType === 'direct') entry.displayName = input.message.sender.name;
    entry.deliveryTarget = targetOf(input.message);
    if (input.message.ephemeral) return;
    // The transcript already holds the turn; a store outage must not turn the reply into an apology.
    await this.options.sessions.save(entry).catch((err: unknown) => {
      (input.logger ?? this.options.logger).error({ err, sessionKey: entry.key }, 'session entry not persisted after retries; it is written again at the next turn or at shutdown');
    });
  }

  private async resetSession(session: ActiveSession, reason: ResetReason | 'manual', ephemeral?: boolean): Promise<void> {
    if (ephemeral) {
      this.ephemeralHistories.set(session, []);
      session.entry = { ...session.entry, sessionId: randomUUID(), messageCount: 0, lastResetReason: reason };
      return;
    }
    await this.options.sessions.reset(session, reason);
  }

  private services(): CommandServices {
    return {
      config: this.options.config,
      now: () => this.options.clock.now(),
      modelOf: (entry) => this.modelOf(entry),
      save: (entry) => this.options.sessions.save(entry),
      stopTurn: (key) => this.lanes.stop(key),
      queueDepth: (key) => this.lanes.depth(key),
      isRunning: (key) => this.lanes.isRunning(key),
      describeReset: (entry) => describeResetPolicy(this.resetPolicyOf(entry)),
    };
  }

  private initOf(message: InboundMessage, key: string): SessionInit {
    const parsed = parseSessionKey(key);
    return {
      key,
      agentId: parsed.agentId,
      channel: message.channel,
      accountId: message.accountId,
      chatType: message.chatType,
      peerId: message.chatType === 'direct' ? message.peerId : undefined,
      groupId: message.groupId,
      threadId: parsed.threadId,
      parentKey: parsed.parentKey,
      displayName: message.chatType === 'direct' ? message.sender.name : undefined,
    };
  }

  private ephemeralSession(init: SessionInit): ActiveSession {
    const now = this.options.clock.now();
    const session: ActiveSession = {
      key: init.key,
      holds: 1,
      entry: {
        ...init, sessionId: randomUUID(), createdAt: now, updatedAt: now, sessionStartedAt: now, state: 'active', runState: 'idle',
        overrides: {}, tokens: emptyTokens(), contextTokens: 0, compactionCount: 0, messageCount: 0,
      },
    };
    this.ephemeralHistories.set(session, []);
    return session;
  }
}
