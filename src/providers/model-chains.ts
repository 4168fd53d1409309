import { parseModelRef, refString, type ModelRef } from '../config/model-refs.ts';
import type { AgentConfig, ResolvedProvider } from '../config/resolved.ts';
import type { Clock } from '../core/clock.ts';
import { CooldownBook } from './cooldowns.ts';
import { FailoverProvider, type FailoverEvent } from './failover.ts';
import { createProvider, keysOf, requireProvider, type ProviderRegistry } from './registry.ts';
import type { Provider } from './types.ts';

/** The model a turn runs on, and the provider (a failover chain when there is more than one target) that calls it. */
export interface ResolvedModel {
  providerId: string;
  model: string;
  /** `"<provider>/<model>"`. */
  ref: string;
  contextWindow: number;
  provider: Provider;
  /** Chosen with `/model`: no fallbacks (a failure says so). */
  userChosen: boolean;
  /** The fallbacks after it, as `"<provider>/<model>"`. */
  fallbacks: string[];
}

/** Options of {@link ModelChains}. */
export interface ModelChainsOptions {
  /** The configured providers (`config.providers`); a registry entry without one has a single key. */
  providers: Readonly<Record<string, ResolvedProvider>>;
  /** The providers with their first key. */
  registry: ProviderRegistry;
  clock: Clock;
  cooldowns?: CooldownBook;
  /** Told of each failover (metrics, `/status`). */
  onFailover?: (event: FailoverEvent) => void;
  /** Builds the provider of one more key (default: the provider kind's client with that key). */
  credential?: (provider: ResolvedProvider, apiKey: string, keyIndex: number) => Provider;
}

/**
 * Turns an agent's model and fallbacks (or a session's `/model` choice) into the provider a call goes to: one
 * provider as it is when there is nothing to fail over to, else a {@link FailoverProvider} over every key of
 * every target, built once per chain and sharing one {@link CooldownBook}.
 */
export class ModelChains {
  readonly cooldowns: CooldownBook;
  private readonly options: ModelChainsOptions;
  private readonly credentials = new Map<string, Provider[]>();
  private readonly chains = new Map<string, Provider>();
  private readonly ownModels = new WeakMap<AgentConfig, ResolvedModel>();
  /** The provider ids a model reference may name. */
  private readonly known: Readonly<Record<string, unknown>>;

  constructor(options: ModelChainsOptions) {
    this.options = options;
    this.known = Object.fromEntries([...options.registry.keys()].map((id) => [id, true]));
    this.cooldowns = options.cooldowns ?? new CooldownBook({ clock: options.clock });
  }

  /**
   * The model of a turn: a `/model` choice (stored as `"<provider>/<model>"`, or a bare name of an older
   * choice) alone; else the turn's own model (a heartbeat's) or the agent's, followed by the agent's fallbacks.
   */
  resolve(agent: AgentConfig, choice: { override?: string; turnModel?: string } = {}): ResolvedModel {
    // The common case (the agent's own model) is asked several times per turn: worked out once per agent.
    if (!choice.override && !choice.turnModel) {
      let resolved = this.ownModels.get(agent);
      if (!resolved) this.ownModels.set(agent, resolved = this.resolveNow(agent, {}));
      return resolved;
    }
    return this.resolveNow(agent, choice);
  }

  private resolveNow(agent: AgentConfig, choice: { override?: string; turnModel?: string }): ResolvedModel {
    const own: ModelRef = { providerId: agent.providerId, model: agent.model };
    const read = (text: string | undefined) => (text ? parseModelRef(text, this.known, agent.providerId) : undefined);
    const chosen = read(choice.override);
    const primary = chosen ?? read(choice.turnModel) ?? own;
    const refs = chosen ? [primary] : [primary, ...agent.fallbacks.filter((f) => refString(f) !== refString(primary))];
    const first = requireProvider(this.options.registry, primary.providerId);
    return {
      providerId: primary.providerId,
      model: primary.model,
      ref: refString(primary),
      contextWindow: first.contextWindow,
      provider: this.chain(refs, Boolean(chosen)),
      userChosen: Boolean(chosen),
      fallbacks: refs.slice(1).map(refString),
    };
  }

  /** Every provider instance of a configured provider, one per key (the registry's own first). */
  credentialsOf(providerId: string): Provider[] {
    let list = this.credentials.get(providerId);
    if (list) return list;
    const first = requireProvider(this.options.registry, providerId);
    const config = this.options.providers[providerId];
    const keys = config && config.kind !== 'offline' ? keysOf(config) : [];
    const build = this.options.credential ?? ((p: ResolvedProvider, key: string) => createProvider(p, key));
    list = [first, ...keys.slice(1).map((key, i) => build(config as ResolvedProvider, key, i + 1))];
    this.credentials.set(providerId, list);
    return list;
  }

  private chain(refs: readonly ModelRef[], userChosen: boolean): Provider {
    const key = `${userChosen ? 'chosen' : 'agent'}:${refs.map(refString).join('\n')}`;
    let provider = this.chains.get(key);
    if (provider) return provider;
    const targets = refs.map((ref) => ({ providerId: ref.providerId, model: ref.model, credentials: this.credentialsOf(ref.providerId) }));
    const single = targets.length === 1 && (targets[0]?.credentials.length ?? 0) === 1;
    // One target with one key and nothing chosen: the provider itself (no wrapper on the common path).
    const only = single && !userChosen ? targets[0]?.credentials[0] : undefined;
    provider = only ?? new FailoverProvider({ targets, cooldowns: this.cooldowns, clock: this.options.clock, userChosen, onFailover: this.options.onFailover });
    this.chains.set(key, provider);
    return provider;
  }
}
