import { describe, expect, it } from 'vitest';
import { LazyProvider } from '../../src/providers/lazy-provider.ts';
import { OfflineProvider } from '../../src/providers/offline.ts';
import { createProvider } from '../../src/providers/registry.ts';
import { tempDir, testConfig } from '../helpers/gateway.ts';

describe('LazyProvider', () => {
  it('builds its provider once, at the first call, and delegates calls and the model list', async () => {
    let loads = 0;
    const lazy = new LazyProvider({ id: 'claude', kind: 'anthropic', model: 'm', contextWindow: 1000, maxTokens: 10 }, async () => {
      loads++;
      return new OfflineProvider({ id: 'claude', model: 'm' });
    });
    expect(loads).toBe(0);
    const [a, b] = await Promise.all([
      lazy.complete({ model: 'm', messages: [{ role: 'user', content: 'hi' }], correlationId: 'c1' }),
      lazy.complete({ model: 'm', messages: [{ role: 'user', content: 'again' }], correlationId: 'c2' }),
    ]);
    expect(loads).toBe(1);
    expect(a.content).toContain('You said: "hi"');
    expect(b.content).toContain('You said: "again"');
    expect(await lazy.listModels()).toEqual(['m']);
    expect(loads).toBe(1);
  });

  it('an anthropic provider is built lazily, with its facts known before', () => {
    const tmp = tempDir();
    try {
      const config = testConfig(tmp.dir, { providers: { claude: { kind: 'anthropic', apiKey: 'sk-ant-x', model: 'claude-x', contextWindow: 200_000, maxTokens: 8192 } }, agents: { defaults: { provider: 'claude' } } });
      const provider = createProvider(config.providers.claude!, 'sk-ant-x');
      expect(provider).toBeInstanceOf(LazyProvider);
      expect(provider).toMatchObject({ id: 'claude', kind: 'anthropic', model: 'claude-x', contextWindow: 200_000, maxTokens: 8192 });
    } finally {
      tmp.remove();
    }
  });
});
