import Anthropic from '@anthropic-ai/sdk';
import { AttemptCounter } from './attempt-counter.ts';
import type {
  Message, MessageCreateParamsNonStreaming, MessageCreateParamsStreaming, RawMessageStreamEvent, Tool,
} from '@anthropic-ai/sdk/resources/messages';
import type { TokenUsage } from '../core/channel-adapter.ts';
import { ProviderError } from '../core/errors.ts';
import type { ToolCall } from '../sessions/transcript.ts';
import { mapAnthropicError } from './anthropic-errors.ts';
import { toAnthropicConversation, toAnthropicTools } from './anthropic-messages.ts';
import type { CallOptions, Provider, ProviderRequest, ProviderResponse, ToolSchema } from './types.ts';

/** Options of {@link AnthropicProvider}; the same as OpenAIProvider's. */
export interface AnthropicProviderOptions {
  id: string;
  /** Sent as the SDK sends it. Empty is allowed with a `baseUrl` (a local proxy): a placeholder is sent. */
  apiKey: string;
  /** Empty = the SDK default (`ANTHROPIC_BASE_URL`, else api.anthropic.com). */
  baseUrl?: string;
  model: string;
  contextWindow: number;
  maxTokens: number;
  correlationHeader: string;
  maxRetries: number;
  timeoutMs: number;
}

/** Usage as the Messages API reports it (a message's, or a stream's `message_start` / `message_delta`). */
interface AnthropicUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

type Params = Omit<MessageCreateParamsNonStreaming, 'stream'>;

/**
 * Anthropic's Messages API through the official `@anthropic-ai/sdk` (SPEC §18), with prompt-cache breakpoints
 * (see {@link toAnthropicConversation}) so the cached prefix grows turn after turn.
 *
 * Thinking is never asked for: `reasoningEffort` is not sent (no extended thinking), and thinking blocks a model
 * returns anyway are dropped, in streams too. Usage is normalized: Anthropic's `input_tokens` already leave out
 * the cache reads and writes, which come as `cacheReadTokens` / `cacheWriteTokens`.
 */
export class AnthropicProvider implements Provider {
  readonly kind = 'anthropic' as const;
  readonly id: string;
  readonly model: string;
  readonly contextWindow: number;
  readonly maxTokens: number;
  private readonly client: Anthropic;
  private readonly options: AnthropicProviderOptions;
  /** Attempts per correlation id, counted at the fetch layer so the client's own retries are visible. */
  private readonly attempts: AttemptCounter;
  /** The request's `tools` of each schema list (the runtime keeps a list as the same array until it changes). */
  private readonly wrappedTools = new WeakMap<readonly ToolSchema[], Tool[]>();

  constructor(options: AnthropicProviderOptions) {
    this.options = options;
    this.id = options.id;
    this.model = options.model;
    this.contextWindow = options.contextWindow;
    this.maxTokens = options.maxTokens;
    this.attempts = new AttemptCounter(options.correlationHeader);
    this.client = new Anthropic({
      // A key passed in code keeps the SDK from looking for credentials elsewhere (environment, profiles on disk).
      apiKey: options.apiKey || 'not-needed',
      baseURL: options.baseUrl || undefined,
      maxRetries: options.maxRetries,
      timeout: options.timeoutMs,
      fetch: this.attempts.fetch,
    });
  }

  async complete(request: ProviderRequest, options: CallOptions = {}): Promise<ProviderResponse> {
    const { system, messages } = toAnthropicConversation(request.messages);
    const params: Params = {
      model: request.model || this.model,
      max_tokens: request.maxTokens ?? this.maxTokens,
      ...(system.length ? { system } : {}),
      messages,
      ...(request.tools?.length ? { tools: this.toolsOf(request.tools) } : {}),
    };
    const requestOptions = {
      signal: options.signal,
      headers: { [this.options.correlationHeader]: request.correlationId },
      ...(options.maxRetries !== undefined ? { maxRetries: options.maxRetries } : {}),
    };
    this.attempts.forget(request.correlationId);
    try {
      const response = options.onDelta
        ? await this.streamed({ ...params, stream: true }, requestOptions, options.onDelta)
        : await this.plain({ ...params, stream: false }, requestOptions);
      response.retries = this.attempts.retriesOf(request.correlationId);
      return response;
    } catch (error) {
      const mapped = options.signal?.aborted && !(error instanceof ProviderError)
        ? new ProviderError('PROVIDER_ABORTED', 'The call was aborted.', { cause: error })
        : mapAnthropicError(error, this.id, this.options.apiKey);
      (mapped as { retries?: number }).retries = this.attempts.retriesOf(request.correlationId);
      throw mapped;
    } finally {
      this.attempts.forget(request.correlationId);
    }
  }

  async listModels(signal?: AbortSignal): Promise<string[]> {
    const ids: string[] = [];
    try {
      for await (const model of this.client.models.list({}, { signal, maxRetries: 0, timeout: 10_000 })) ids.push(model.id);
    } catch (error) {
      throw mapAnthropicError(error, this.id, this.options.apiKey);
    }
    return ids;
  }

  private toolsOf(tools: readonly ToolSchema[]): Tool[] {
    let wrapped = this.wrappedTools.get(tools);
    if (!wrapped) {
      wrapped = toAnthropicTools(tools);
      this.wrappedTools.set(tools, wrapped);
    }
    return wrapped;
  }


  // `retries` is filled in by complete().
  private async plain(params: MessageCreateParamsNonStreaming, requestOptions: object): Promise<ProviderResponse> {
    const message: Message = await this.client.messages.create(params, requestOptions);
    let content = '';
    const toolCalls: ToolCall[] = [];
    for (const block of message.content) {
      if (block.type === 'text') content += block.text;
      else if (block.type === 'tool_use') toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
      // thinking, redacted_thinking and server-side blocks never reach the chat
    }
    return {
      content, toolCalls, usage: normalizeAnthropicUsage(message.usage), finishReason: finishReasonOf(message.stop_reason),
      model: message.model || params.model, retries: 0,
    };
  }

  private async streamed(params: MessageCreateParamsStreaming, requestOptions: { signal?: AbortSignal }, onDelta: (text: string) => void): Promise<ProviderResponse> {
    const stream = await this.client.messages.create(params, requestOptions);
    let content = '';
    let model = params.model;
    let finishReason: string | undefined;
    let usage: AnthropicUsage | undefined;
    let stopped = false;
    // Tool-use blocks by their index in the message: id, name, and the input's JSON as it arrives in pieces.
    const calls = new Map<number, { id: string; name: string; json: string; input: unknown }>();
    for await (const event of stream as AsyncIterable<RawMessageStreamEvent>) {
      switch (event.type) {
        case 'message_start':
          model = event.message.model || model;
          usage = { ...event.message.usage };
          break;
        case 'content_block_start':
          if (event.content_block.type === 'tool_use') {
            calls.set(event.index, { id: event.content_block.id, name: event.content_block.name, json: '', input: event.content_block.input });
          } else if (event.content_block.type === 'text' && event.content_block.text) {
            content += event.content_block.text;
            onDelta(event.content_block.text);
          }
          break;
        case 'content_block_delta':
          if (event.delta.type === 'text_delta') {
            content += event.delta.text;
            onDelta(event.delta.text);
          } else if (event.delta.type === 'input_json_delta') {
            const call = calls.get(event.index);
            if (call) call.json += event.delta.partial_json;
          }
          // thinking_delta, signature_delta, citations_delta: not for the chat
          break;
        case 'message_delta':
          if (event.delta.stop_reason) finishReason = finishReasonOf(event.delta.stop_reason);
          usage = mergeUsage(usage, event.usage);
          break;
        case 'message_stop':
          stopped = true;
          break;
        default:
          break;
      }
    }
    // The SDK ends a stream quietly when it is aborted; an aborted call must not pass for a short answer.
    if (requestOptions.signal?.aborted) throw new ProviderError('PROVIDER_ABORTED', 'The call was aborted.');
    if (!stopped) {
      throw new ProviderError('PROVIDER_UNAVAILABLE', `Provider "${this.id}" ended its stream before the answer was complete; try again.`, { retryable: true });
    }
    const toolCalls = [...calls.values()].map((c) => ({ id: c.id, name: c.name, arguments: argumentsOf(c.json, c.input) }));
    return { content, toolCalls, usage: normalizeAnthropicUsage(usage), finishReason, model, retries: 0 };
  }
}

/**
 * Anthropic usage as ours. `input_tokens` already excludes the cache reads and writes (unlike OpenAI's
 * `prompt_tokens`), so it is taken as it is. Undefined when there is no usage.
 */
export function normalizeAnthropicUsage(usage: AnthropicUsage | null | undefined): TokenUsage | undefined {
  if (!usage) return undefined;
  return {
    inputTokens: usage.input_tokens ?? 0,
    outputTokens: usage.output_tokens ?? 0,
    cacheReadTokens: usage.cache_read_input_tokens ?? 0,
    cacheWriteTokens: usage.cache_creation_input_tokens ?? 0,
  };
}

/** `stop_reason` in the chat completions words the rest of Switchboard uses; other reasons pass as they are. */
function finishReasonOf(reason: string | null | undefined): string | undefined {
  switch (reason) {
    case 'end_turn': return 'stop';
    case 'max_tokens': return 'length';
    case 'tool_use': return 'tool_calls';
    default: return reason ?? undefined;
  }
}

/** A stream's `message_delta` usage over its `message_start` usage: `output_tokens` is cumulative; input figures that come again win. */
function mergeUsage(start: AnthropicUsage | undefined, delta: AnthropicUsage): AnthropicUsage {
  const merged: AnthropicUsage = { ...start };
  for (const key of ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'] as const) {
    const value = delta[key];
    if (typeof value === 'number') merged[key] = value;
  }
  return merged;
}

/** A streamed tool call's arguments as the plain answer gives them (compact JSON); text that is not JSON as it came. */
function argumentsOf(json: string, startInput: unknown): string {
  if (!json) return JSON.stringify(startInput ?? {});
  try {
    return JSON.stringify(JSON.parse(json));
  } catch {
    return json;
  }
}
