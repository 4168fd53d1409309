import { ProviderError } from '../core/errors.ts';
import { withoutRuntimeLine } from '../core/runtime-line.ts';
import { countTokens } from '../tokens/tokens.ts';
import type { CallOptions, Provider, ProviderRequest, ProviderResponse } from './types.ts';

/**
 * Answers without any network: deterministic, and says that it is offline. The default when no provider
 * key or base URL is configured, so a fresh checkout runs with no account anywhere.
 */
export class OfflineProvider implements Provider {
  readonly kind = 'offline' as const;
  readonly id: string;
  readonly model: string;
  readonly contextWindow: number;
  readonly maxTokens: number;

  constructor(options: { id: string; model?: string; contextWindow?: number; maxTokens?: number }) {
    this.id = options.id;
    this.model = options.model ?? 'offline';
    this.contextWindow = options.contextWindow ?? 128_000;
    this.maxTokens = options.maxTokens ?? 4096;
  }

  async listModels(): Promise<string[]> {
    return [this.model];
  }

  async complete(request: ProviderRequest, options: CallOptions = {}): Promise<ProviderResponse> {
    if (options.signal?.aborted) throw new ProviderError('PROVIDER_ABORTED', 'The call was aborted.');
    const lastUser = [...request.messages].reverse().find((m) => m.role === 'user');
    const turns = request.messages.filter((m) => m.role === 'user').length;
    const said = withoutRuntimeLine(lastUser?.content ?? '').trim();
    const full = [
      `(offline) You said: "${said.length > 500 ? `${said.slice(0, 500)}…` : said}"`,
      '',
      `I am the offline provider: no LLM is configured, so I only echo. This conversation has ${turns} message${turns === 1 ? '' : 's'} from you.`,
      'Set OPENAI_API_KEY (or OPENAI_BASE_URL for any OpenAI-compatible server) to talk to a real model.',
    ].join('\n');
    const content = request.maxTokens ? cutToTokens(full, request.maxTokens, this.model) : full;
    if (options.onDelta) for (const piece of content.match(/\S+\s*/g) ?? []) options.onDelta(piece);
    const inputTokens = request.messages.reduce((n, m) => n + countTokens(m.content, this.model) + 4, 0);
    return {
      content,
      toolCalls: [],
      usage: { inputTokens, outputTokens: countTokens(content, this.model), cacheReadTokens: 0, cacheWriteTokens: 0 },
      finishReason: content === full ? 'stop' : 'length',
      model: this.model,
      retries: 0,
    };
  }
}

/** The longest run of whole words of `text` within `maxTokens` tokens (as a real model stops at max_tokens). */
function cutToTokens(text: string, maxTokens: number, model: string): string {
  if (countTokens(text, model) <= maxTokens) return text;
  let kept = '';
  for (const piece of text.match(/\S+\s*/g) ?? []) {
    if (countTokens(kept + piece, model) > maxTokens) break;
    kept += piece;
  }
  return kept.trimEnd();
}
