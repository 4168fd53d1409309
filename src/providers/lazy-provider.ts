import type { CallOptions, Provider, ProviderKind, ProviderRequest, ProviderResponse } from './types.ts';

/** What a provider is before it is built. */
export interface LazyProviderFacts {
  id: string;
  kind: ProviderKind;
  model: string;
  contextWindow: number;
  maxTokens: number;
}

/**
 * A provider whose client library is loaded at its first call, so a gateway that never calls it (or a command
 * line that only lists pairing requests) does not pay for loading the SDK at start. No transcription.
 */
export class LazyProvider implements Provider {
  readonly id: string;
  readonly kind: ProviderKind;
  readonly model: string;
  readonly contextWindow: number;
  readonly maxTokens: number;
  private loading: Promise<Provider> | undefined;
  private readonly load: () => Promise<Provider>;

  constructor(facts: LazyProviderFacts, load: () => Promise<Provider>) {
    this.id = facts.id;
    this.kind = facts.kind;
    this.model = facts.model;
    this.contextWindow = facts.contextWindow;
    this.maxTokens = facts.maxTokens;
    this.load = load;
  }

  async complete(request: ProviderRequest, options?: CallOptions): Promise<ProviderResponse> {
    return (await this.provider()).complete(request, options);
  }

  async listModels(signal?: AbortSignal): Promise<string[]> {
    const provider = await this.provider();
    return provider.listModels ? provider.listModels(signal) : [provider.model];
  }

  private provider(): Promise<Provider> {
    this.loading ??= this.load();
    return this.loading;
  }
}
