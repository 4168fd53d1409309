import type { TokenUsage } from '../core/channel-adapter.ts';
import type { ToolCall } from '../sessions/transcript.ts';

/** An image in a user message (SPEC §15): sent as an OpenAI `image_url` part after the message's text. */
export interface ChatImage {
  /** `data:<mime>;base64,…`, or an `https://` URL passed through from the API. */
  url: string;
  /** Estimated prompt tokens of the image (the provider's tile rule). */
  tokens: number;
  width?: number;
  height?: number;
}

/** One message of an LLM request. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** User messages: images shown with the text, in order (only for models that see). */
  images?: ChatImage[];
  name?: string;
  toolCalls?: ToolCall[];
  toolCallId?: string;
  /**
   * System message only: offsets into `content` where a part that stays byte-identical from request to request
   * ends (the system prompt; each compaction summary block), ascending. A provider with explicit cache
   * breakpoints (Anthropic's `cache_control`) splits the content there; others send it as one string.
   */
  cacheBreaks?: number[];
}

/** A function the model may call (JSON schema parameters). */
export interface ToolSchema {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** One LLM call. */
export interface ProviderRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ToolSchema[];
  maxTokens?: number;
  /** Sent upstream in the provider's correlation header. */
  correlationId: string;
  reasoningEffort?: string;
}

/** What one LLM call returned. */
export interface ProviderResponse {
  content: string;
  toolCalls: ToolCall[];
  /** Provider-reported usage; undefined when the provider reported none. */
  usage?: TokenUsage;
  finishReason?: string;
  /** The model the provider says answered. */
  model: string;
  /** Attempts beyond the first (429/5xx/connection retries). */
  retries: number;
  /** The configured provider (`providers.<id>`) that answered; absent = the one called. Set by failover. */
  providerId?: string;
  /** Calls that failed before this answer (failover: other keys or models tried first), in order. */
  failedAttempts?: FailedAttempt[];
}

/** One call of a failover chain that failed before another target answered (or before the chain gave up). */
export interface FailedAttempt {
  providerId: string;
  model: string;
  /** Which of the provider's keys (0 = `apiKey`, then `apiKeys` in order). */
  keyIndex: number;
  /** The ProviderError code. */
  code: string;
  message: string;
  durationMs: number;
  retries: number;
}

/** Per-call options. */
export interface CallOptions {
  signal?: AbortSignal;
  /** When given, the call streams and each text delta is passed here. */
  onDelta?: (text: string) => void;
  /** Retries of this call in place of the provider's `maxRetries` (failover asks for 0 while another target is left). */
  maxRetries?: number;
}

/** How a provider is spoken to: the OpenAI-compatible API, Anthropic's Messages API, or the offline echo. */
export type ProviderKind = 'openai' | 'anthropic' | 'offline';

/** An LLM backend. Errors are ProviderError with `retryable` and the provider's status. */
export interface Provider {
  readonly id: string;
  readonly kind: ProviderKind;
  /** Default model of this provider. */
  readonly model: string;
  readonly contextWindow: number;
  readonly maxTokens: number;
  complete(request: ProviderRequest, options?: CallOptions): Promise<ProviderResponse>;
  /**
   * Speech → text through the provider's `POST /v1/audio/transcriptions` (SPEC §15). Absent: the provider
   * cannot transcribe. Rejects with a ProviderError.
   */
  transcribe?(audio: { data: Buffer; name: string; mime: string }, options: { model: string; signal?: AbortSignal; correlationId?: string }): Promise<string>;
  /** The model ids the provider offers (`GET /models`); rejects when it cannot be asked. */
  listModels?(signal?: AbortSignal): Promise<string[]>;
}
