import type { TokenUsage } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import { BudgetExceededError, isAbortError, ProviderError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import type { FailedAttempt, Provider, ProviderResponse, ToolSchema } from '../providers/types.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { ActiveSession } from '../sessions/manager.ts';
import type { BuiltContext } from './context/context.ts';
import { countTokens } from '../tokens/tokens.ts';
import { addUsage, markScheduledRun, scopedEvent, zeroUsage, type LlmCallEvent, type LlmCallKind, type TurnEvents, type TurnScope } from './turn-events.ts';
import { formatCount } from '../core/plural.ts';

/** What an accounted call needs. */
export interface ProviderCallerDeps {
  clock: Clock;
  events: TurnEvents;
  /** The session token budget of an agent (0 = none). */
  budgetOf(agentId: string): number;
}

/** The turn facts a call is charged to. */
export interface CallInput {
  correlationId: string;
  signal: AbortSignal;
  onDelta?: (text: string) => void;
  message: InboundMessage;
}

/** One accounted LLM call: who calls, what is sent, and where its usage is added. */
export interface ProviderCallRequest {
  session: ActiveSession;
  provider: Provider;
  model: string;
  context: BuiltContext;
  kind: LlmCallKind;
  input: CallInput;
  /** The turn's usage so far; this call's is added to it. */
  usage: TokenUsage;
  /** Whether any usage of the turn was estimated, and the model that answered. */
  state: { estimated: boolean; model?: string };
  logger: Logger;
  tools?: ToolSchema[];
  /** The predicted prompt: the session's last reported prompt size plus what was added since, else the calibrated estimate (our count times the model's factor); our raw count when absent. */
  estimate?: number;
  /**
   * The setting the session budget comes from, named in the refusal: `session.tokenBudget` (the default) or
   * the agent's own `agents.list[].tokenBudget`.
   */
  budgetKey?: string;
}

/**
 * Every LLM call of the product goes through here: the session budget is checked first (SPEC §14), then the
 * provider is called, usage (or a tokenizer estimate) is added to the turn, the key's and the session id's
 * totals, and one llm-call event is emitted (accounting, the ledger and metrics observe it).
 */
export class ProviderCaller {
  private readonly deps: ProviderCallerDeps;

  constructor(deps: ProviderCallerDeps) {
    this.deps = deps;
  }

  /** One LLM call with accounting: usage (or a tokenizer estimate), session totals, and the llm-call event. */
  async call(request: ProviderCallRequest): Promise<ProviderResponse> {
    const { session, provider, model, context, kind, input, usage, state, logger, tools = [] } = request;
    const entry = session.entry;
    const t0 = this.deps.clock.now();
    const parentCorrelationId = input.message.internal?.parentCorrelationId;
    const scope: TurnScope = { correlationId: input.correlationId, sessionKey: session.key, sessionId: entry.sessionId, channel: input.message.channel, agentId: entry.agentId };
    if (parentCorrelationId) scope.parentCorrelationId = parentCorrelationId;
    markScheduledRun(scope, input.message.internal);
    const maxTokens = lowerCap(this.checkSessionBudget(entry, request, logger), this.checkRunBudget(request, logger));
    let response: ProviderResponse;
    try {
      response = await provider.complete(
        { model, messages: context.messages, tools, correlationId: input.correlationId, reasoningEffort: entry.overrides.reasoningEffort, maxTokens },
        { signal: input.signal, onDelta: kind === 'turn' ? input.onDelta : undefined },
      );
    } catch (error) {
      // A failover chain that gave up lists every call it made; each is a failed call of its own provider.
      const attempts = (error as { failedAttempts?: FailedAttempt[] }).failedAttempts;
      if (attempts?.length) this.emitFailed(scope, kind, context, attempts);
      else {
        const code = error instanceof ProviderError ? error.code : 'PROVIDER_FAILED';
        this.deps.events.emit('onLlmCall', scopedEvent(scope, {
          kind, providerId: provider.id, modelId: model, usage: zeroUsage(), isEstimated: false, estimatedInputTokensByComponent: context.components,
          retries: (error as { retries?: number }).retries ?? 0, durationMs: this.deps.clock.now() - t0, error: code, at: this.deps.clock.now(),
        }));
      }
      if (!isAbortError(error)) logger.warn({ err: error, providerId: provider.id, model }, 'LLM call failed');
      throw error;
    }
    if (response.failedAttempts?.length) this.emitFailed(scope, kind, context, response.failedAttempts);
    entry.lastRequestAt = this.deps.clock.now();
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
    const current = entry.sessionTokens ?? { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
    entry.sessionTokens = {
      input: current.input + callUsage.inputTokens, output: current.output + callUsage.outputTokens,
      cacheRead: current.cacheRead + callUsage.cacheReadTokens, cacheWrite: current.cacheWrite + callUsage.cacheWriteTokens,
    };
    // The ledger records who answered: after a failover, another provider and model than the one asked.
    const event = scopedEvent(scope, {
      kind, providerId: response.providerId ?? provider.id, modelId: response.model || model, usage: callUsage, isEstimated: estimated, estimatedInputTokensByComponent: context.components,
      // The failed calls' retries are on their own events.
      retries: Math.max(0, response.retries - (response.failedAttempts ?? []).reduce((n, a) => n + a.retries, 0)), durationMs: this.deps.clock.now() - t0, at: this.deps.clock.now(),
    }) as LlmCallEvent;
    if (response.toolCalls.length) event.toolCalls = response.toolCalls.map((c) => c.name);
    this.deps.events.emit('onLlmCall', event);
    return response;
  }

  /** One failed llm-call event per call a failover chain made before it answered or gave up. */
  private emitFailed(scope: TurnScope, kind: LlmCallKind, context: BuiltContext, attempts: readonly FailedAttempt[]): void {
    for (const a of attempts) {
      this.deps.events.emit('onLlmCall', scopedEvent(scope, {
        kind, providerId: a.providerId, modelId: a.model, usage: zeroUsage(), isEstimated: false, estimatedInputTokensByComponent: context.components,
        retries: a.retries, durationMs: a.durationMs, error: a.code, at: this.deps.clock.now(),
      }));
    }
  }

  /**
   * SPEC §14: the predicted prompt (see `estimate`) is checked against what is left of the session id's input +
   * output tokens under its agent's `tokenBudget`. A call with no room left for an answer is not made
   * (nothing is sent, nothing is charged); otherwise the completion is capped at what is left
   * (`min(provider.maxTokens, left − prompt)`), so an answer cannot take the session past its budget.
   * Returns that cap, or undefined when there is no budget (the provider's own maxTokens applies).
   */
  private checkSessionBudget(entry: SessionEntry, request: ProviderCallRequest, logger: Logger): number | undefined {
    const budget = this.deps.budgetOf(entry.agentId);
    if (!budget) return undefined;
    const used = (entry.sessionTokens?.input ?? 0) + (entry.sessionTokens?.output ?? 0);
    const prompt = Math.max(0, Math.round(request.estimate ?? request.context.tokens));
    const reserve = Math.min(request.provider.maxTokens, budget - used - prompt);
    if (reserve >= 1) return reserve;
    const { input } = request;
    this.deps.events.emit('onRefusal', { reason: 'session_budget', correlationId: input.correlationId, channel: input.message.channel, sessionKey: entry.key, at: this.deps.clock.now() });
    logger.info({ used, budget, prompt }, 'LLM call refused: it would pass the session token budget');
    const key = request.budgetKey ?? 'session.tokenBudget';
    throw new BudgetExceededError('session_budget', `This conversation has used ${formatCount(used)} of its ${formatCount(budget)}-token budget, and the next request alone needs about ${formatCount(prompt)} more, so I did not send it. Start a new session with /new, or ask the owner to raise the budget (${key}).`);
  }

  /**
   * SPEC §17: a run with its own budget (`internal.runTokenBudget`, a job's `tokenBudget`) is held to it the way a
   * session is held to `tokenBudget`: the turn's input + output tokens so far plus the predicted prompt must leave
   * room for an answer, which is then capped at what is left. A call past it is not made; the batch ends
   * `budget-limited` with the refusal's text. Returns the cap, or undefined when the run has no budget of its own.
   */
  private checkRunBudget(request: ProviderCallRequest, logger: Logger): number | undefined {
    const { input } = request;
    const budget = input.message.internal?.runTokenBudget;
    if (!budget || budget <= 0) return undefined;
    const used = request.usage.inputTokens + request.usage.outputTokens;
    const prompt = Math.max(0, Math.round(request.estimate ?? request.context.tokens));
    const reserve = Math.min(request.provider.maxTokens, budget - used - prompt);
    if (reserve >= 1) return reserve;
    this.deps.events.emit('onRefusal', { reason: 'run_budget', correlationId: input.correlationId, channel: input.message.channel, sessionKey: request.session.key, at: this.deps.clock.now() });
    logger.info({ used, budget, prompt, jobId: input.message.internal?.jobId }, 'LLM call refused: it would pass the run token budget');
    const what = input.message.internal?.jobId ? `This run of job "${input.message.internal.jobId}"` : 'This run';
    throw new BudgetExceededError('run_budget', `${what} stopped at its token budget: it has used ${formatCount(used)} of ${formatCount(budget)} tokens, and the next request alone needs about ${formatCount(prompt)} more, so I did not send it. Raise the job's tokenBudget to let it do more.`);
  }
}

/** The smaller of two completion caps, either of which may be absent. */
function lowerCap(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  return b === undefined ? a : Math.min(a, b);
}
