import OpenAI, { APIConnectionError, APIError, APIUserAbortError, toFile } from 'openai';
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
  /** Attempts seen per correlation id, counted at the fetch layer so the client's own retries are visible. */
  private readonly attempts = new Map<string, number>();
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
    const header = options.correlationHeader.toLowerCase();
    const countingFetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const headers = init?.headers;
      const id = headers instanceof Headers ? headers.get(header) : new Headers(headers).get(header);
      if (id) this.attempts.set(id, (this.attempts.get(id) ?? 0) + 1);
      return fetch(input, init);
    };
    this.client = new OpenAI({
      apiKey: options.apiKey || 'not-needed',
      baseURL: options.baseUrl || undefined,
      maxRetries: options.maxRetries,
      timeout: options.timeoutMs,
      fetch: countingFetch,
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
    const requestOptions = { signal, headers: { [this.options.correlationHeader]: request.correlationId } };
    this.attempts.delete(request.correlationId);
    try {
      const response = options.onDelta
        ? await this.streamed(params, requestOptions, options.onDelta)
        : await this.plain(params, requestOptions);
      response.retries = this.retriesOf(request.correlationId);
      return response;
    } catch (error) {
      const mapped = mapError(error, this.id);
      (mapped as { retries?: number }).retries = this.retriesOf(request.correlationId);
      throw mapped;
    } finally {
      this.attempts.delete(request.correlationId);
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
      if (correlationId) this.attempts.delete(correlationId);
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

  private retriesOf(correlationId: string): number {
    return Math.max(0, (this.attempts.get(correlationId) ?? 1) - 1);
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
      content: message?.content ?? '',
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
      if (delta?.content) {
        content += delta.content;
        onDelta(delta.content);
      }
      for (const call of delta?.tool_calls ?? []) {
        const current = calls.get(call.index) ?? { id: '', name: '', arguments: '' };
        if (call.id) current.id = call.id;
        if (call.function?.name) current.name += call.function.name;
        if (call.function?.arguments) current.arguments += call.function.arguments;
        calls.set(call.index, current);
      }
    }
    return { content, toolCalls: [...calls.values()], usage, finishReason, model, retries: 0 };
  }
}

/** Maps OpenAI-style usage to ours: cached prompt tokens are cache reads; cache writes where reported. */
export function normalizeUsage(usage: unknown): TokenUsage | undefined {
  if (!usage || typeof usage !== 'object') return undefined;
  const u = usage as {
    prompt_tokens?: number; completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number; cache_creation_tokens?: number } | null;
    cache_creation_input_tokens?: number; cache_read_input_tokens?: number;
  };
  if (typeof u.prompt_tokens !== 'number' && typeof u.completion_tokens !== 'number') return undefined;
  const cacheRead = u.prompt_tokens_details?.cached_tokens ?? u.cache_read_input_tokens ?? 0;
  const cacheWrite = u.prompt_tokens_details?.cache_write_tokens ?? u.prompt_tokens_details?.cache_creation_tokens ?? u.cache_creation_input_tokens ?? 0;
  return {
    inputTokens: Math.max(0, (u.prompt_tokens ?? 0) - cacheRead - cacheWrite),
    outputTokens: u.completion_tokens ?? 0,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
  };
}

function mapError(error: unknown, providerId: string): ProviderError {
  if (error instanceof ProviderError) return error;
  if (error instanceof APIUserAbortError || (error instanceof Error && error.name === 'AbortError')) {
    return new ProviderError('PROVIDER_ABORTED', 'The call was aborted.', { cause: error });
  }
  if (error instanceof APIConnectionError) {
    return new ProviderError('PROVIDER_UNAVAILABLE', `Provider "${providerId}" is unreachable (${error.message}); check its baseUrl and that the server runs.`, { retryable: true, cause: error });
  }
  if (error instanceof APIError) {
    const status = error.status as number | undefined;
    const body = error.error as { code?: string; message?: string } | undefined;
    const detail = body?.message ?? error.message;
    if (body?.code === 'context_length_exceeded' || /context[_ ]length|maximum context|too many tokens|context window/i.test(detail ?? '')) {
      return new ProviderError('CONTEXT_OVERFLOW', `The conversation is longer than the model's context window: ${detail}`, { status, cause: error });
    }
    if (status === 401 || status === 403) {
      return new ProviderError('PROVIDER_AUTH', `Provider "${providerId}" refused the API key (HTTP ${status}); check OPENAI_API_KEY.`, { status, cause: error });
    }
    if (status === 429) return new ProviderError('PROVIDER_RATE_LIMITED', `Provider "${providerId}" is rate limiting (HTTP 429): ${detail}`, { status, retryable: true, cause: error });
    return new ProviderError('PROVIDER_FAILED', `Provider "${providerId}" answered HTTP ${status ?? '?'}: ${detail}`, { status, retryable: (status ?? 500) >= 500, cause: error });
  }
  return new ProviderError('PROVIDER_FAILED', `Provider "${providerId}" failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
}
