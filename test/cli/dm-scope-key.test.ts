import { describe, expect, it } from 'vitest';
import { dmScopeWarning } from '../../src/routing/dm-scope-warning.ts';
import { tempDir, testConfig } from '../helpers/gateway.ts';

describe('the dmScope "main" warning', () => {
  it('names the shared session of the default (first) agent, not a hard-coded agent:main:main', () => {
    const tmp = tempDir();
    try {
      const config = testConfig(tmp.dir, {
        agents: { list: [{ id: 'helper' }, { id: 'other' }] },
        channels: { telegram: { dmPolicy: 'open' } },
      }, { TELEGRAM_BOT_TOKEN: '123:abc' });
      expect(dmScopeWarning(config, [])).toBe('session.dmScope is "main" and direct messages on telegram are open to anyone: all of them share ONE conversation (agent:helper:main) '
        + 'and see each other\'s context. Set session.dmScope to "per-peer" (or "per-channel-peer") to give each person their own.');
    } finally {
      tmp.remove();
    }
  });
});
