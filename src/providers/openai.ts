import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError, toFile } from 'openai';
import { AttemptCounter } from './attempt-counter.ts';
import type {
  ChatCompletionChunk, ChatCompletionCreateParams, ChatCompletionCreateParamsNonStreaming, ChatCompletionCreateParamsStreaming, ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { TokenUsage } from '../core/channel-adapter.ts';
import { ProviderError } from '../core/errors.ts';
import type { ToolCall } from '../sessions/transcript.ts';
import { toOpenAIMessage } from './openai-messages.ts';
import type { CallOptions, Provider, ProviderRequest, ProviderResponse, ToolSchema } from './types.ts';

/** Options of {@link OpenAIProvider}. */
export interface OpenAIProviderOptions {
  id: string;
  apiKey: string;
  /** Any OpenAI-compatible endpoint; empty = api.openai.com. */
  baseUrl?: string;
  model: string;
  contextWindow: number;
  maxTokens: number;
  correlationHeader: string;
  maxRetries: number;
  timeoutMs: number;
  /** Ask for usage in streams (`stream_options.include_usage`). */
  streamUsage?: boolean;
}

/** Calls per caller signal made with that signal itself, under Node's 10-listener warning with room for other listeners. */
export const DIRECT_CALLS_PER_SIGNAL = 4;

/** Any OpenAI-compatible chat completions endpoint, through the official `openai` client. */
export class OpenAIProvider implements Provider {
  readonly kind = 'openai' as const;
  readonly id: string;
  readonly model: string;
  readonly contextWindow: number;
  readonly maxTokens: number;
  private readonly client: OpenAI;
  private readonly options: OpenAIProviderOptions;
  /** Attempts per correlation id, counted at the fetch layer so the client's own retries are visible. */
  private readonly attempts: AttemptCounter;
  /** Calls that got each caller's signal as it is (see {@link callSignal}). */
  private readonly directCalls = new WeakMap<AbortSignal, number>();
  /** The request's `tools` of each schema list (the runtime keeps a list as the same array until it changes). */
  private readonly wrappedTools = new WeakMap<readonly ToolSchema[], ChatCompletionTool[]>();

  constructor(options: OpenAIProviderOptions) {
    this.options = options;
    this.id = options.id;
    this.model = options.model;
    this.contextWindow = options.contextWindow;
    this.maxTokens = options.maxTokens;
    this.attempts = new AttemptCounter(options.correlationHeader);
    this.client = new OpenAI({
      apiKey: options.apiKey || 'not-needed',
      baseURL: options.baseUrl || undefined,
      maxRetries: options.maxRetries,
      timeout: options.timeoutMs,
      fetch: this.attempts.fetch,
    });
  }

  async complete(request: ProviderRequest, options: CallOptions = {}): Promise<ProviderResponse> {
    const params: ChatCompletionCreateParams = {
      model: request.model,
      messages: request.messages.map(toOpenAIMessage),
      max_completion_tokens: request.maxTokens ?? this.maxTokens,
      ...(request.tools?.length ? { tools: this.toolsOf(request.tools) } : {}),
      ...(request.reasoningEffort ? { reasoning_effort: request.reasoningEffort as 'low' } : {}),
    };
    const signal = this.callSignal(options.signal);
    const requestOptions = {
      signal, headers: { [this.options.correlationHeader]: request.correlationId },
      ...(options.maxRetries !== undefined ? { maxRetries: options.maxRetries } : {}),
    };
    this.attempts.forget(request.correlationId);
    try {
      const response = options.onDelta
        ? await this.streamed(params, requestOptions, options.onDelta)
        : await this.plain(params, requestOptions);
      response.retries = this.attempts.retriesOf(request.correlationId);
      return response;
    } catch (error) {
      const mapped = mapError(error, this.id);
      (mapped as { retries?: number }).retries = this.attempts.retriesOf(request.correlationId);
      throw mapped;
    } finally {
      this.attempts.forget(request.correlationId);
    }
  }

  /**
   * Speech → text through `POST /audio/transcriptions` (SPEC §15), with this provider's timeout, retries (429, 5xx,
   * connection), correlation header and the caller's signal. Resolves with the text, trimmed; rejects with a
   * ProviderError mapped as a chat call's failure is.
   */
  async transcribe(audio: { data: Buffer; name: string; mime: string }, options: { model: string; signal?: AbortSignal; correlationId?: string }): Promise<string> {
    const correlationId = options.correlationId;
    const requestOptions = { signal: this.callSignal(options.signal), ...(correlationId ? { headers: { [this.options.correlationHeader]: correlationId } } : {}) };
    try {
      const file = await toFile(audio.data, audio.name, { type: audio.mime });
      const result: unknown = await this.client.audio.transcriptions.create({ file, model: options.model }, requestOptions);
      // `json` (the default) answers `{ text }`; a compatible server may answer plain text.
      const text = typeof result === 'string' ? result : (result as { text?: unknown } | null)?.text;
      if (typeof text !== 'string') throw new ProviderError('PROVIDER_FAILED', `Provider "${this.id}" answered a transcription without text.`);
      return text.trim();
    } catch (error) {
      throw mapError(error, this.id);
    } finally {
      if (correlationId) this.attempts.forget(correlationId);
    }
  }

  async listModels(signal?: AbortSignal): Promise<string[]> {
    const ids: string[] = [];
    try {
      for await (const model of this.client.models.list({ signal, maxRetries: 0, timeout: 10_000 })) ids.push(model.id);
    } catch (error) {
      throw mapError(error, this.id);
    }
    return ids;
  }

  /**
   * The signal the client gets for one call. The client hangs an abort listener on it and never takes it off,
   * and one turn's signal can see dozens of calls (tool loops, staged summaries): the first
   * {@link DIRECT_CALLS_PER_SIGNAL} calls of a signal get it as it is (a turn's usual one call then creates no
   * signal; Node 20's `AbortSignal.any` costs some 15 µs and weak references for the collector), later ones a
   * signal of their own that follows it, so no signal collects more listeners than Node's warning allows.
   */
  private callSignal(signal: AbortSignal | undefined): AbortSignal | undefined {
    if (!signal) return undefined;
    const calls = this.directCalls.get(signal) ?? 0;
    if (calls >= DIRECT_CALLS_PER_SIGNAL) return AbortSignal.any([signal]);
    this.directCalls.set(signal, calls + 1);
    return signal;
  }

  private toolsOf(tools: readonly ToolSchema[]): ChatCompletionTool[] {
    let wrapped = this.wrappedTools.get(tools);
    if (!wrapped) {
      wrapped = tools.map((t) => ({ type: 'function' as const, function: t }));
      this.wrappedTools.set(tools, wrapped);
    }
    return wrapped;
  }


  // The request body gets `stream` (and `stream_options`) added in place, last as before: `{ ...params, stream }`
  // costs microseconds on Node 20 (see scopedEvent in agent/turn-events.ts). `retries` is filled in by complete().
  private async plain(params: ChatCompletionCreateParams, requestOptions: object): Promise<ProviderResponse> {
    const body = params as ChatCompletionCreateParamsNonStreaming;
    body.stream = false;
    const completion = await this.client.chat.completions.create(body, requestOptions);
    const choice = completion.choices[0];
    const message = choice?.message;
    return {
      content: stripThink(message?.content ?? ''),
      toolCalls: (message?.tool_calls ?? []).flatMap((c) => (c.type === 'function' ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : [])),
      usage: normalizeUsage(completion.usage),
      finishReason: choice?.finish_reason ?? undefined,
      model: completion.model || params.model,
      retries: 0,
    };
  }

  private async streamed(params: ChatCompletionCreateParams, requestOptions: object, onDelta: (text: string) => void): Promise<ProviderResponse> {
    const body = params as ChatCompletionCreateParamsStreaming;
    body.stream = true;
    if (this.options.streamUsage !== false) body.stream_options = { include_usage: true };
    const stream = await this.client.chat.completions.create(body, requestOptions);
    let content = '';
    const think = new ThinkFilter((text) => {
      content += text;
      onDelta(text);
    });
    let usage: TokenUsage | undefined;
    let finishReason: string | undefined;
    let model = params.model;
    const calls = new Map<number, ToolCall>();
    for await (const chunk of stream as AsyncIterable<ChatCompletionChunk>) {
      if (chunk.model) model = chunk.model;
      if (chunk.usage) usage = normalizeUsage(chunk.usage);
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.finish_reason) finishReason = choice.finish_reason;
      const delta = choice.delta;
      // Reasoning (`reasoning_content`, `reasoning`) is never read; a leading <think> block is dropped.
      if (delta?.content) think.push(delta.content);
      for (const call of delta?.tool_calls ?? []) {
        const current = calls.get(call.index) ?? { id: '', name: '', arguments: '' };
        if (call.id) current.id = call.id;
        if (call.function?.name) current.name += call.function.name;
        if (call.function?.arguments) current.arguments += call.function.arguments;
        calls.set(call.index, current);
      }
    }
    think.end();
    return { content, toolCalls: [...calls.values()], usage, finishReason, model, retries: 0 };
  }
}

/**
 * Maps OpenAI-style usage to ours: cached prompt tokens are cache reads; cache writes where reported; reasoning
 * tokens (`completion_tokens_details.reasoning_tokens`, part of the completion tokens) where reported.
 */
export function normalizeUsage(usage: unknown): TokenUsage | undefined {
  if (!usage || typeof usage !== 'object') return undefined;
  const u = usage as {
    prompt_tokens?: number; completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number; cache_creation_tokens?: number } | null;
    cache_creation_input_tokens?: number; cache_read_input_tokens?: number;
    completion_tokens_details?: { reasoning_tokens?: number } | null;
  };
  if (typeof u.prompt_tokens !== 'number' && typeof u.completion_tokens !== 'number') return undefined;
  const cacheRead = u.prompt_tokens_details?.cached_tokens ?? u.cache_read_input_tokens ?? 0;
  const cacheWrite = u.prompt_tokens_details?.cache_write_tokens ?? u.prompt_tokens_details?.cache_creation_tokens ?? u.cache_creation_input_tokens ?? 0;
  const reasoning = u.completion_tokens_details?.reasoning_tokens;
  return {
    inputTokens: Math.max(0, (u.prompt_tokens ?? 0) - cacheRead - cacheWrite),
    outputTokens: u.completion_tokens ?? 0,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    ...(typeof reasoning === 'number' ? { reasoningTokens: reasoning } : {}),
  };
}

function mapError(error: unknown, providerId: string): ProviderError {
  if (error instanceof ProviderError) return error;
  if (error instanceof APIUserAbortError || (error instanceof Error && error.name === 'AbortError')) {
    return new ProviderError('PROVIDER_ABORTED', 'The call was aborted.', { cause: error });
  }
  // A subclass of APIConnectionError: before it.
  if (error instanceof APIConnectionTimeoutError) {
    return new ProviderError('PROVIDER_TIMEOUT', `Provider "${providerId}" did not answer in time; it may be overloaded, or raise its timeoutMs.`, { retryable: true, cause: error });
  }
  if (error instanceof APIConnectionError) {
    return new ProviderError('PROVIDER_UNAVAILABLE', `Provider "${providerId}" is unreachable (${error.message}); check its baseUrl and that the server runs.`, { retryable: true, cause: error });
  }
  if (error instanceof APIError) {
    const status = error.status as number | undefined;
    const body = error.error as { code?: string; type?: string; message?: string } | undefined;
    const detail = body?.message ?? error.message;
    if (body?.code === 'context_length_exceeded' || /context[_ ]length|maximum context|too many tokens|context window/i.test(detail ?? '')) {
      return new ProviderError('CONTEXT_OVERFLOW', `The conversation is longer than the model's context window: ${detail}`, { status, cause: error });
    }
    if (status === 401 || status === 403) {
      const fix = providerId === 'default' ? 'OPENAI_API_KEY' : `providers.${providerId}.apiKey`;
      return new ProviderError('PROVIDER_AUTH', `Provider "${providerId}" refused the API key (HTTP ${status}); check ${fix}.`, { status, cause: error });
    }
    if (status === 529 || isOverloaded(body?.type) || isOverloaded(body?.code)) {
      return new ProviderError('PROVIDER_OVERLOADED', `Provider "${providerId}" is overloaded (HTTP ${status ?? '?'}): ${detail}`, { status, retryable: true, cause: error });
    }
    if (status === 408) return new ProviderError('PROVIDER_TIMEOUT', `Provider "${providerId}" timed out (HTTP 408): ${detail}`, { status, retryable: true, cause: error });
    if (status === 429) return new ProviderError('PROVIDER_RATE_LIMITED', `Provider "${providerId}" is rate limiting (HTTP 429): ${detail}`, { status, retryable: true, cause: error });
    return new ProviderError('PROVIDER_FAILED', `Provider "${providerId}" answered HTTP ${status ?? '?'}: ${detail}`, { status, retryable: (status ?? 500) >= 500, cause: error });
  }
  if (brokeOff(error)) {
    return new ProviderError('PROVIDER_UNAVAILABLE', `The connection to provider "${providerId}" broke off during the answer (${(error as Error).message}).`, { retryable: true, cause: error });
  }
  return new ProviderError('PROVIDER_FAILED', `Provider "${providerId}" failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
}

/** A streamed answer whose connection closed before its end (undici: `TypeError: terminated`, a socket error cause). */
function brokeOff(error: unknown): boolean {
  if (!(error instanceof TypeError)) return false;
  const cause = (error as { cause?: { code?: unknown } }).cause;
  return error.message === 'terminated' || cause?.code === 'UND_ERR_SOCKET' || cause?.code === 'ECONNRESET';
}

function isOverloaded(value: string | undefined): boolean {
  return value === 'overloaded' || value === 'overloaded_error';
}

const OPEN = '<think>';
const CLOSE = '</think>';

/**
 * The content without a reasoning block at its very start (`<think>…</think>`, leading whitespace allowed, and the
 * whitespace after it), as Qwen and DeepSeek-R1 templates put it in the answer. An unclosed block leaves nothing.
 */
export function stripThink(content: string): string {
  const start = /^\s*<think>/.exec(content);
  if (!start) return content;
  const close = content.indexOf(CLOSE, start[0].length);
  return close < 0 ? '' : content.slice(close + CLOSE.length).trimStart();
}

/**
 * {@link stripThink} for a stream: text pushed in pieces (tags may be split anywhere) comes out without the leading
 * think block; nothing inside it is ever passed on. Call `end()` after the last piece.
 */
export class ThinkFilter {
  private state: 'start' | 'think' | 'after' | 'pass' = 'start';
  /** `start`: what came so far (whitespace and a prefix of `<think>`); `think`: a possible prefix of `</think>`. */
  private held = '';
  constructor(private readonly emit: (text: string) => void) {}

  push(text: string): void {
    if (!text) return;
    if (this.state === 'pass') {
      this.emit(text);
      return;
    }
    if (this.state === 'start') {
      this.held += text;
      const rest = this.held.trimStart();
      if (rest.startsWith(OPEN)) {
        this.state = 'think';
        this.held = '';
        text = rest.slice(OPEN.length);
      } else if (OPEN.startsWith(rest)) return;
      else {
        this.state = 'pass';
        const held = this.held;
        this.held = '';
        this.emit(held);
        return;
      }
    }
    if (this.state === 'think') {
      const inside = this.held + text;
      const close = inside.indexOf(CLOSE);
      if (close < 0) {
        this.held = inside.slice(-(CLOSE.length - 1));
        return;
      }
      this.held = '';
      this.state = 'after';
      text = inside.slice(close + CLOSE.length);
    }
    const answer = text.trimStart();
    if (!answer) return;
    this.state = 'pass';
    this.emit(answer);
  }

  /** The stream ended: text held as a possible `<think>` start is passed on; an unclosed block yields nothing. */
  end(): void {
    if (this.state === 'start' && this.held) this.emit(this.held);
    this.held = '';
  }
}
