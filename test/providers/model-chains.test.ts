import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { FailoverProvider } from '../../src/providers/failover.ts';
import { ModelChains } from '../../src/providers/model-chains.ts';
import { createProviders } from '../../src/providers/registry.ts';
import { tempDir, testConfig } from '../helpers/gateway.ts';

// Which provider a turn's call goes to (SPEC §18): the plain provider when nothing can fail over, else a chain.
describe('ModelChains', () => {
  const build = (providers: Record<string, unknown>, defaults: Record<string, unknown> = {}) => {
    const tmp = tempDir();
    try {
      const config = testConfig(tmp.dir, { providers, agents: { defaults } });
      const models = new ModelChains({ providers: config.providers, registry: createProviders(config), clock: new ManualClock() });
      return { config, models, agent: config.agents[0]! };
    } finally {
      tmp.remove();
    }
  };
  const one = { default: { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'sk-one', model: 'gpt-a', models: ['gpt-b'] } };

  it('one model with one key is the provider itself; the same object every time', () => {
    const { models, agent } = build(one);
    const resolved = models.resolve(agent);
    expect(resolved.provider).not.toBeInstanceOf(FailoverProvider);
    expect(resolved).toMatchObject({ providerId: 'default', model: 'gpt-a', ref: 'default/gpt-a', userChosen: false, fallbacks: [] });
    expect(models.resolve(agent)).toBe(resolved);
  });

  it('more keys, or fallbacks, make a chain over every key of every target, built once', () => {
    const { models, agent } = build({ ...one, backup: { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'sk-b1', apiKeys: ['sk-b2', 'sk-b1'] } }, { fallbacks: ['backup/gpt-4o-mini', 'default/gpt-a'] });
    const resolved = models.resolve(agent);
    // The fallback equal to the model itself is dropped; a key listed twice is one key.
    expect(resolved.fallbacks).toEqual(['backup/gpt-4o-mini']);
    const chain = resolved.provider as FailoverProvider;
    expect(chain).toBeInstanceOf(FailoverProvider);
    expect(chain.targets.map((t) => [t.providerId, t.model, t.credentials.length])).toEqual([['default', 'gpt-a', 1], ['backup', 'gpt-4o-mini', 2]]);
    expect(models.credentialsOf('backup')).toHaveLength(2);
    expect(models.resolve(agent, { turnModel: 'gpt-b' }).provider).toBe(models.resolve(agent, { turnModel: 'default/gpt-b' }).provider);
  });

  it('a /model choice is alone and marked chosen, even with one key; a heartbeat model keeps the fallbacks', () => {
    const { models, agent } = build({ ...one, backup: { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'sk-b1' } }, { fallbacks: ['backup/gpt-4o-mini'] });
    const chosen = models.resolve(agent, { override: 'default/gpt-b' });
    expect(chosen).toMatchObject({ model: 'gpt-b', userChosen: true, fallbacks: [] });
    expect((chosen.provider as FailoverProvider).userChosen).toBe(true);
    // An older choice stored as a bare name is a model of the agent's provider.
    expect(models.resolve(agent, { override: 'gpt-b' })).toMatchObject({ ref: 'default/gpt-b', userChosen: true });
    expect(models.resolve(agent, { turnModel: 'gpt-b' })).toMatchObject({ ref: 'default/gpt-b', userChosen: false, fallbacks: ['backup/gpt-4o-mini'] });
  });
});
