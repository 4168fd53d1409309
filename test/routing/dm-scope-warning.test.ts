import { describe, expect, it } from 'vitest';
import type { ChannelAccountConfig, ResolvedConfig } from '../../src/config/resolved.ts';
import { dmScopeWarning, mainScopePeers } from '../../src/routing/dm-scope-warning.ts';
import type { PairedPeer } from '../../src/routing/pairing.ts';

type Platform = 'telegram' | 'discord' | 'slack';

const account = (over: Partial<ChannelAccountConfig> = {}): ChannelAccountConfig => ({
  accountId: 'default', enabled: true, dmPolicy: 'pairing', allowFrom: [], groupPolicy: 'open', groups: [], requireMention: false, ...over,
});

function config(channels: Partial<Record<Platform, Partial<ChannelAccountConfig>[]>>, session: { dmScope?: string; identityLinks?: Record<string, string[]> } = {}) {
  return {
    session: { dmScope: session.dmScope ?? 'main', identityLinks: session.identityLinks ?? {} },
    channels: {
      telegram: (channels.telegram ?? []).map(account), discord: (channels.discord ?? []).map(account), slack: (channels.slack ?? []).map(account), webchat: { enabled: true },
    },
  } as unknown as Pick<ResolvedConfig, 'channels' | 'session'>;
}

const peer = (channel: string, peerId: string): PairedPeer => ({ channel, peerId, approvedAt: 0 });

const TAIL = ': all of them share ONE conversation (agent:main:main) and see each other\'s context. '
  + 'Set session.dmScope to "per-peer" (or "per-channel-peer") to give each person their own.';

describe('mainScopePeers', () => {
  it('lists allowFrom entries as channel:id, without the channel prefix or @, sorted and distinct', () => {
    const c = config({ telegram: [{ allowFrom: [' 42 ', 'telegram:7', 'TELEGRAM:@Bob', '@carol', '42'] }], slack: [{ allowFrom: ['U1'] }] });
    expect(mainScopePeers(c, [])).toEqual({ peers: ['slack:u1', 'telegram:42', 'telegram:7', 'telegram:bob', 'telegram:carol'], openTo: [] });
  });

  it('a prefix of another channel is kept (it names someone else)', () => {
    expect(mainScopePeers(config({ telegram: [{ allowFrom: ['discord:9'] }] }), []).peers).toEqual(['telegram:discord:9']);
  });

  it('an @ inside an entry is kept; only a leading one is dropped', () => {
    expect(mainScopePeers(config({ telegram: [{ allowFrom: ['a@b'] }] }), []).peers).toEqual(['telegram:a@b']);
  });

  it('identity links merge one person across channels (case-insensitive)', () => {
    const c = config({ telegram: [{ allowFrom: ['42'] }], discord: [{ allowFrom: ['99'] }] }, { identityLinks: { alice: ['Telegram:42', 'discord:99'], bob: ['slack:U2'] } });
    expect(mainScopePeers(c, [])).toEqual({ peers: ['alice'], openTo: [] });
  });

  it('an identity link names only the ids it lists; an unlinked person stays apart', () => {
    const c = config({ telegram: [{ allowFrom: ['42', '43'] }] }, { identityLinks: { alice: ['telegram:42'], bob: ['slack:U2'] } });
    expect(mainScopePeers(c, [])).toEqual({ peers: ['alice', 'telegram:43'], openTo: [] });
  });

  it('paired peers count under dmPolicy pairing only, on their own channel', () => {
    const paired = [peer('telegram', '42'), peer('discord', '5'), peer('slack', '6')];
    const c = config({ telegram: [{ dmPolicy: 'pairing' }], discord: [{ dmPolicy: 'allowlist' }], slack: [{ dmPolicy: 'pairing', enabled: false }] });
    expect(mainScopePeers(c, paired)).toEqual({ peers: ['telegram:42'], openTo: [] });
  });

  it('open DMs and a * in allowFrom make the channel open to anyone; listed channels are sorted', () => {
    const c = config({ telegram: [{ dmPolicy: 'open', allowFrom: ['42'] }], discord: [{ dmPolicy: 'allowlist', allowFrom: [' * '] }], slack: [{ allowFrom: ['U1'] }] });
    expect(mainScopePeers(c, [peer('telegram', '8')])).toEqual({ peers: ['slack:u1'], openTo: ['discord', 'telegram'] });
  });

  it('disabled or switched-off accounts let nobody in', () => {
    const c = config({ telegram: [{ dmPolicy: 'disabled', allowFrom: ['*'] }], discord: [{ enabled: false, dmPolicy: 'open' }] });
    expect(mainScopePeers(c, [peer('telegram', '42')])).toEqual({ peers: [], openTo: [] });
  });

  it('every account of a channel counts', () => {
    const c = config({ telegram: [{ accountId: 'a', allowFrom: ['1'] }, { accountId: 'b', allowFrom: ['2'] }] });
    expect(mainScopePeers(c, []).peers).toEqual(['telegram:1', 'telegram:2']);
  });
});

describe('dmScopeWarning', () => {
  it('says nothing under a dmScope other than main', () => {
    expect(dmScopeWarning(config({ telegram: [{ dmPolicy: 'open' }] }, { dmScope: 'per-peer' }), [])).toBeUndefined();
    expect(dmScopeWarning(config({ telegram: [{ allowFrom: ['1', '2'] }] }, { dmScope: 'per-channel-peer' }), [])).toBeUndefined();
  });

  it('says nothing for one person (or nobody)', () => {
    expect(dmScopeWarning(config({}), [])).toBeUndefined();
    expect(dmScopeWarning(config({ telegram: [{ allowFrom: ['42'] }] }), [peer('telegram', '42')])).toBeUndefined();
  });

  it('names open channels', () => {
    expect(dmScopeWarning(config({ telegram: [{ dmPolicy: 'open' }] }), [])).toBe(`session.dmScope is "main" and direct messages on telegram are open to anyone${TAIL}`);
    expect(dmScopeWarning(config({ slack: [{ allowFrom: ['*'] }], discord: [{ dmPolicy: 'open' }] }), []))
      .toBe(`session.dmScope is "main" and direct messages on discord and slack are open to anyone${TAIL}`);
  });

  it('counts distinct people and names the first five', () => {
    expect(dmScopeWarning(config({ telegram: [{ allowFrom: ['1', '2'] }] }), []))
      .toBe(`session.dmScope is "main" and 2 different people can write to the bot directly (telegram:1, telegram:2)${TAIL}`);
    expect(dmScopeWarning(config({ telegram: [{ allowFrom: ['1', '2', '3', '4', '5'] }] }), []))
      .toBe(`session.dmScope is "main" and 5 different people can write to the bot directly (telegram:1, telegram:2, telegram:3, telegram:4, telegram:5)${TAIL}`);
    expect(dmScopeWarning(config({ telegram: [{ allowFrom: ['1', '2', '3', '4', '5', '6'] }] }), []))
      .toBe(`session.dmScope is "main" and 6 different people can write to the bot directly (telegram:1, telegram:2, telegram:3, telegram:4, telegram:5, …)${TAIL}`);
  });
});
