import { describe, expect, it } from 'vitest';
import type { Binding } from '../../src/config/schema.ts';
import { agentOf, specificity, type BindingFacts } from '../../src/routing/bindings.ts';

const b = (agentId: string, match: Binding['match']): Binding => ({ agentId, match });

const facts = (over: Partial<BindingFacts> = {}): BindingFacts => ({ channel: 'discord', accountId: 'default', chatType: 'channel', groupId: 'C1', containerIds: ['G1'], ...over });

describe('specificity', () => {
  it('peer 8, guild or team 4, account 2, channel 1', () => {
    expect(specificity(b('a', { channel: 'discord' }))).toBe(1);
    expect(specificity(b('a', { channel: 'discord', accountId: 'x' }))).toBe(3);
    expect(specificity(b('a', { channel: 'discord', guildId: 'G1' }))).toBe(5);
    expect(specificity(b('a', { channel: 'slack', teamId: 'T1' }))).toBe(5);
    expect(specificity(b('a', { channel: 'discord', peer: { kind: 'channel', id: 'C1' } }))).toBe(9);
    expect(specificity(b('a', { channel: 'discord', accountId: 'x', guildId: 'G1', peer: { kind: 'channel', id: 'C1' } }))).toBe(15);
  });
});

describe('agentOf', () => {
  const bindings: Binding[] = [
    b('channel', { channel: 'discord' }),
    b('account', { channel: 'discord', accountId: 'work' }),
    b('guild', { channel: 'discord', guildId: 'G1' }),
    b('peer', { channel: 'discord', peer: { kind: 'channel', id: 'c1' } }),
    b('dm', { channel: 'discord', peer: { kind: 'direct', id: 'U9' } }),
    b('team', { channel: 'slack', teamId: 'T1' }),
  ];

  it.each([
    ['the peer binding wins over guild, account and channel', facts({ accountId: 'work' }), 'peer'],
    ['peer ids match case-insensitively', facts({ groupId: 'C1' }), 'peer'],
    ['a guild binding beats an account binding', facts({ accountId: 'work', groupId: 'C2' }), 'guild'],
    ['an account binding beats the channel binding', facts({ accountId: 'work', groupId: 'C2', containerIds: ['G2'] }), 'account'],
    ['the channel binding catches the rest', facts({ groupId: 'C2', containerIds: ['G2'] }), 'channel'],
    ['no container ids: no guild match', facts({ groupId: 'C2', containerIds: undefined }), 'channel'],
    ['a direct peer binding matches the DM peer', facts({ chatType: 'direct', peerId: 'u9', groupId: undefined, containerIds: undefined }), 'dm'],
    ['a direct peer binding does not match a channel with that id', facts({ groupId: 'U9', containerIds: undefined }), 'channel'],
    ['a channel peer binding does not match a DM from that id', facts({ chatType: 'direct', peerId: 'C1', groupId: undefined, containerIds: undefined }), 'channel'],
    ['a team binding matches through the container ids', facts({ channel: 'slack', containerIds: ['T1'] }), 'team'],
    ['another team falls back', facts({ channel: 'slack', containerIds: ['T2'] }), 'fallback'],
    ['no binding for the channel falls back', facts({ channel: 'telegram', chatType: 'direct', peerId: 'U9' }), 'fallback'],
  ])('%s', (_name, f, expected) => {
    expect(agentOf(bindings, f, 'fallback')).toBe(expected);
  });

  it('of two equally specific matches the first listed wins', () => {
    const two = [b('first', { channel: 'discord', guildId: 'G1' }), b('second', { channel: 'discord', accountId: 'default', guildId: 'G9' }), b('third', { channel: 'discord', teamId: 'G1' })];
    expect(agentOf(two, facts(), 'fallback')).toBe('first');
  });

  it('a peer binding does not match a message without that id (a DM without a peer id)', () => {
    expect(agentOf([b('dm', { channel: 'discord', peer: { kind: 'direct', id: 'U9' } })], facts({ chatType: 'direct', groupId: undefined }), 'fallback')).toBe('fallback');
  });

  it('guild and team ids compare without case, as peer ids do', () => {
    expect(agentOf(bindings, facts({ groupId: 'C2', containerIds: ['g1'] }), 'main')).toBe('guild');
    expect(agentOf(bindings, facts({ channel: 'slack', groupId: 'C2', containerIds: ['t1'] }), 'main')).toBe('team');
    expect(agentOf([b('lower', { channel: 'slack', teamId: 't2' })], facts({ channel: 'slack', containerIds: ['T2'] }), 'main')).toBe('lower');
    expect(agentOf(bindings, facts({ channel: 'slack', groupId: 'C2', containerIds: ['T3'] }), 'main')).toBe('main');
  });

  it('no bindings: the fallback', () => {
    expect(agentOf([], facts(), 'main')).toBe('main');
  });
});
