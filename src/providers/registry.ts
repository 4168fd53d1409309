import type { ResolvedConfig } from '../config/resolved.ts';
import { ConfigError } from '../core/errors.ts';
import { OfflineProvider } from './offline.ts';
import { OpenAIProvider } from './openai.ts';
import type { Provider } from './types.ts';

/** The configured providers by id. */
export type ProviderRegistry = Map<string, Provider>;

/** Builds one provider per `providers.<id>` entry. */
export function createProviders(config: Pick<ResolvedConfig, 'providers'>): ProviderRegistry {
  const registry: ProviderRegistry = new Map();
  for (const [id, p] of Object.entries(config.providers)) {
    registry.set(id, p.kind === 'offline'
      ? new OfflineProvider({ id, model: p.model, contextWindow: p.contextWindow, maxTokens: p.maxTokens })
      : new OpenAIProvider({ id, apiKey: p.apiKey, baseUrl: p.baseUrl, model: p.model, contextWindow: p.contextWindow, maxTokens: p.maxTokens,
        correlationHeader: p.correlationHeader, maxRetries: p.maxRetries, timeoutMs: p.timeoutMs, streamUsage: p.streamUsage }));
  }
  return registry;
}

export function requireProvider(registry: ProviderRegistry, id: string): Provider {
  const provider = registry.get(id);
  if (!provider) throw new ConfigError(`No provider "${id}" is configured: add it under providers.`);
  return provider;
}
