import { ConfigError } from '../core/errors.ts';

/** A model of one configured provider (SPEC §18: written `"<provider>/<model>"`). */
export interface ModelRef {
  providerId: string;
  model: string;
}

/** The provider facts model references are checked against. */
export interface ProviderModels {
  /** The provider's default model. */
  model: string;
  /** What it serves besides `model`. */
  models: readonly string[];
}

/** `"<provider>/<model>"`. */
export function refString(ref: ModelRef): string {
  return `${ref.providerId}/${ref.model}`;
}

/**
 * Reads a model reference. `"<provider>/<model>"` names a configured provider's model; anything else (a bare
 * name, or one whose part before the first `/` is no provider, as OpenRouter's `"anthropic/claude-…"`) is a
 * model of `defaultProviderId`. Undefined when the text is empty.
 */
export function parseModelRef(text: string, providers: Readonly<Record<string, unknown>>, defaultProviderId: string): ModelRef | undefined {
  const value = text.trim();
  if (!value) return undefined;
  const slash = value.indexOf('/');
  if (slash > 0 && slash < value.length - 1 && Object.hasOwn(providers, value.slice(0, slash))) {
    return { providerId: value.slice(0, slash), model: value.slice(slash + 1) };
  }
  return { providerId: defaultProviderId, model: value };
}

/** Every configured model as `"<provider>/<model>"`: each provider's default first, then its `models`. */
export function configuredModels(providers: Readonly<Record<string, ProviderModels>>): string[] {
  const out: string[] = [];
  for (const [id, p] of Object.entries(providers)) {
    for (const model of [p.model, ...p.models]) {
      const ref = `${id}/${model}`;
      if (!out.includes(ref)) out.push(ref);
    }
  }
  return out;
}

/** Whether the provider of `ref` serves its model (its default or one of `models`). */
export function isConfigured(ref: ModelRef, providers: Readonly<Record<string, ProviderModels>>): boolean {
  const provider = providers[ref.providerId];
  return Boolean(provider && (provider.model === ref.model || provider.models.includes(ref.model)));
}

/**
 * A reference from the configuration, checked: its provider must exist. `where` names the key in the error.
 * The model itself is not checked against `models` (an agent may name any model its provider serves).
 */
export function requireModelRef(text: string, providers: Readonly<Record<string, unknown>>, defaultProviderId: string, where: string): ModelRef {
  const ref = parseModelRef(text, providers, defaultProviderId);
  if (!ref) throw new ConfigError(`Invalid configuration: ${where} is empty; write "<provider>/<model>".`);
  if (!Object.hasOwn(providers, ref.providerId)) {
    throw new ConfigError(`Invalid configuration: ${where} ("${text}") names provider "${ref.providerId}", which is not under providers (configured: ${Object.keys(providers).join(', ') || 'none'}).`);
  }
  return ref;
}
