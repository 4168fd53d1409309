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
}

/** Per-call options. */
export interface CallOptions {
  signal?: AbortSignal;
  /** When given, the call streams and each text delta is passed here. */
  onDelta?: (text: string) => void;
}

/** An LLM backend. Errors are ProviderError with `retryable` and the provider's status. */
export interface Provider {
  readonly id: string;
  readonly kind: 'openai' | 'offline';
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
