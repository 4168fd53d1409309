import { describe, expect, it } from 'vitest';
import { resolveAckReaction } from '../../src/config/ack-reaction.ts';
import { testConfig, tempDir } from '../helpers/gateway.ts';

describe('channels.<platform>.ackReaction', () => {
  it('defaults to 👀 in groups and none in direct messages; a string sets groups; an object each chat type', () => {
    expect(resolveAckReaction(undefined, undefined)).toEqual({ direct: '', group: '👀' });
    expect(resolveAckReaction(undefined, '✅')).toEqual({ direct: '', group: '✅' });
    expect(resolveAckReaction(undefined, '')).toEqual({ direct: '', group: '' });
    expect(resolveAckReaction({ direct: '👍' }, '✅')).toEqual({ direct: '👍', group: '✅' });
  });

  it('accounts inherit the channel setting and may override it', () => {
    const tmp = tempDir();
    try {
      const config = testConfig(tmp.dir, { channels: { telegram: { ackReaction: '🔥', accounts: { work: { botToken: 't1' }, quiet: { botToken: 't2', ackReaction: '' } } } } });
      const byId = Object.fromEntries(config.channels.telegram.map((a) => [a.accountId, a.ackReaction]));
      expect(byId).toEqual({ work: { direct: '', group: '🔥' }, quiet: { direct: '', group: '' } });
      expect(testConfig(tmp.dir, {}).channels.discord[0]?.ackReaction).toEqual({ direct: '', group: '👀' });
    } finally {
      tmp.remove();
    }
  });
});
