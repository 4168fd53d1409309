import { afterEach, describe, expect, it } from 'vitest';
import { configuredModels, parseModelRef } from '../../src/config/model-refs.ts';
import { tempDir, testConfig } from '../helpers/gateway.ts';

// SPEC §18: providers of two kinds, keys to rotate through, models as "<provider>/<model>" with fallbacks.
describe('providers and model references in the configuration', () => {
  const dirs: { remove: () => void }[] = [];
  const dir = () => {
    const d = tempDir();
    dirs.push(d);
    return d.dir;
  };
  afterEach(() => { for (const d of dirs.splice(0)) d.remove(); });
  const refused = (overrides: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): string => {
    try {
      testConfig(dir(), overrides, env);
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('expected the config to be refused');
  };
  const twoProviders = {
    providers: {
      default: { apiKey: 'sk-open-aaaaaaaa', model: 'gpt-4o-mini', models: ['gpt-4o'] },
      claude: { kind: 'anthropic', apiKey: 'sk-ant-bbbbbbbb', apiKeys: ['sk-ant-cccccccc'], models: ['claude-haiku-4-5'] },
    },
  };

  it('reads "<provider>/<model>" for the agent and its fallbacks; a bare name is a model of the agent\'s provider', () => {
    const config = testConfig(dir(), { ...twoProviders, agents: { defaults: { model: 'claude/claude-haiku-4-5', fallbacks: ['gpt-4o', 'default/gpt-4o-mini'] } } });
    const agent = config.agents[0]!;
    expect(agent).toMatchObject({ providerId: 'claude', model: 'claude-haiku-4-5' });
    expect(agent.fallbacks).toEqual([{ providerId: 'default', model: 'gpt-4o' }, { providerId: 'default', model: 'gpt-4o-mini' }]);
    // An anthropic provider without a model gets Claude's default, not OpenAI's.
    expect(config.providers.claude).toMatchObject({ kind: 'anthropic', model: 'claude-sonnet-4-5', apiKeys: ['sk-ant-cccccccc'] });
    expect(configuredModels(config.providers)).toEqual(['default/gpt-4o-mini', 'default/gpt-4o', 'claude/claude-sonnet-4-5', 'claude/claude-haiku-4-5']);
  });

  it('keeps a slash that names no provider inside the model (OpenRouter-style ids)', () => {
    expect(parseModelRef('anthropic/claude-3.5-sonnet', { default: {} }, 'default')).toEqual({ providerId: 'default', model: 'anthropic/claude-3.5-sonnet' });
    expect(parseModelRef('default/anthropic/claude-3.5-sonnet', { default: {} }, 'default')).toEqual({ providerId: 'default', model: 'anthropic/claude-3.5-sonnet' });
    expect(parseModelRef('  ', { default: {} }, 'default')).toBeUndefined();
  });

  it('refuses an agent provider that is not configured; fallbacks are per agent, else the defaults\'', () => {
    // "nope/x" is read as model "nope/x" of the agent's provider (see above), so only a provider key can name nothing.
    expect(refused({ ...twoProviders, agents: { list: [{ id: 'main', provider: 'gone' }] } })).toMatch(/agents\.list\[main\]\.provider names "gone"/);
    const config = testConfig(dir(), { ...twoProviders, agents: { list: [{ id: 'main', fallbacks: ['claude/claude-haiku-4-5'] }, { id: 'work' }] } });
    expect(config.agents.map((a) => a.fallbacks.length)).toEqual([1, 0]);
  });

  it('an anthropic provider needs a key: from the config, ${NAME} in it, or ANTHROPIC_API_KEY', () => {
    const agents = { defaults: { provider: 'claude' } };
    expect(refused({ providers: { claude: { kind: 'anthropic' } }, agents })).toMatch(/providers\.claude is an anthropic provider without a key; set its apiKey/);
    const fromEnv = testConfig(dir(), { providers: { claude: { kind: 'anthropic' } }, agents }, { ANTHROPIC_API_KEY: ' sk-ant-from-env \n' });
    expect(fromEnv.providers.claude!.apiKey).toBe('sk-ant-from-env');
    const named = testConfig(dir(), { providers: { claude: { kind: 'anthropic', apiKey: '${CLAUDE_KEY}', apiKeys: ['${CLAUDE_KEY_2}'] } }, agents }, { CLAUDE_KEY: 'sk-ant-one-1111', CLAUDE_KEY_2: 'sk-ant-two-2222' });
    expect(named.providers.claude).toMatchObject({ apiKey: 'sk-ant-one-1111', apiKeys: ['sk-ant-two-2222'] });
    // Every key, substituted or not, is a secret kept out of logs.
    expect(named.secrets).toEqual(expect.arrayContaining(['sk-ant-one-1111', 'sk-ant-two-2222']));
    expect(refused({ providers: { claude: { kind: 'anthropic', apiKey: '${MISSING_KEY}' } }, agents })).toMatch(/providers\.claude\.apiKey names \$\{MISSING_KEY\}, which is not set/);
    expect(refused({ providers: { default: { apiKeys: [''] } } })).toMatch(/providers\.default\.apiKeys/);
  });

  it('an openai provider with keys only in apiKeys is not the offline one; without key or URL it is', () => {
    expect(testConfig(dir(), { providers: { default: { apiKeys: ['sk-only-in-list'] } } }).providers.default).toMatchObject({ kind: 'openai', model: 'gpt-4o-mini' });
    expect(testConfig(dir(), { providers: { default: { models: ['gpt-4o'] } } }).providers.default).toMatchObject({ kind: 'offline', model: 'offline', models: [] });
    expect(testConfig(dir(), twoProviders).secrets).toEqual(expect.arrayContaining(['sk-open-aaaaaaaa', 'sk-ant-bbbbbbbb', 'sk-ant-cccccccc']));
  });
});
