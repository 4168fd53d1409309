import type { ResolvedConfig, ResolvedProvider } from '../config/resolved.ts';
import { ConfigError } from '../core/errors.ts';
import { LazyProvider } from './lazy-provider.ts';
import { OfflineProvider } from './offline.ts';
import { OpenAIProvider } from './openai.ts';
import type { Provider } from './types.ts';

/** The configured providers by id (each with its first key; {@link credentialsOf} gives one per key). */
export type ProviderRegistry = Map<string, Provider>;

/** Builds one provider per `providers.<id>` entry, with its first key. */
export function createProviders(config: Pick<ResolvedConfig, 'providers'>): ProviderRegistry {
  const registry: ProviderRegistry = new Map();
  for (const [id, p] of Object.entries(config.providers)) registry.set(id, createProvider(p, p.apiKey || p.apiKeys[0] || ''));
  return registry;
}

/** The provider of one configured entry, speaking with `apiKey`. */
export function createProvider(p: ResolvedProvider, apiKey: string): Provider {
  const common = { id: p.id, model: p.model, contextWindow: p.contextWindow, maxTokens: p.maxTokens };
  if (p.kind === 'offline') return new OfflineProvider(common);
  const remote = { ...common, apiKey, baseUrl: p.baseUrl, correlationHeader: p.correlationHeader, maxRetries: p.maxRetries, timeoutMs: p.timeoutMs };
  // The Anthropic SDK is loaded at the first call: most gateways never use it, and it costs start-up time.
  if (p.kind === 'anthropic') return new LazyProvider({ ...common, kind: 'anthropic' }, async () => new (await import('./anthropic.ts')).AnthropicProvider(remote));
  return new OpenAIProvider({ ...remote, streamUsage: p.streamUsage });
}

/** Every key of a configured provider, in order: `apiKey` (when set), then `apiKeys`; duplicates once. */
export function keysOf(p: Pick<ResolvedProvider, 'apiKey' | 'apiKeys'>): string[] {
  return [...new Set([p.apiKey, ...p.apiKeys].filter((k) => k.length > 0))];
}

export function requireProvider(registry: ProviderRegistry, id: string): Provider {
  const provider = registry.get(id);
  if (!provider) throw new ConfigError(`No provider "${id}" is configured: add it under providers.`);
  return provider;
}
