import { afterEach, describe, expect, it } from 'vitest';
import type { ChannelAccountConfig } from '../../src/config/resolved.ts';
import { ManualClock } from '../../src/core/clock.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { decideAccess, groupAllowed, senderListed } from '../../src/routing/access-policy.ts';
import { PairingStore } from '../../src/routing/pairing.ts';

const account = (over: Partial<ChannelAccountConfig> = {}): ChannelAccountConfig => ({
  accountId: 'default', enabled: true, dmPolicy: 'pairing', allowFrom: [], groupPolicy: 'open', groups: [], requireMention: false, ...over,
});

const dm = (over: Partial<InboundMessage> = {}): InboundMessage => ({
  id: '1', channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: '42', peerId: '42',
  sender: { id: '42', username: 'Alice', name: 'Alice A' }, text: 'hi', attachments: [], mentionsBot: false, receivedAt: 0, ...over,
});

const group = (over: Partial<InboundMessage> = {}): InboundMessage =>
  dm({ chatType: 'group', chatId: '-100', groupId: '-100', ...over });

const run = { action: 'run' };
const noCommand = { isCommand: false };

describe('decideAccess: dmPolicy', () => {
  const stores: PairingStore[] = [];
  const pairing = () => {
    const store = new PairingStore({ uri: 'memory', clock: new ManualClock() });
    stores.push(store);
    return store;
  };
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
  });

  it('open: anyone may write', async () => {
    expect(await decideAccess(dm(), account({ dmPolicy: 'open' }), undefined, noCommand)).toEqual(run);
  });

  it('disabled: nobody may write, not even a sender in allowFrom or a paired one', async () => {
    const store = pairing();
    const { request } = await store.request('telegram', 'default', '42') as { request: { code: string } };
    await store.approve('telegram', request.code);
    const decision = await decideAccess(dm(), account({ dmPolicy: 'disabled', allowFrom: ['42', '*'] }), store, noCommand);
    expect(decision).toEqual({ action: 'block', reason: 'direct messages are disabled' });
    expect(decision).not.toHaveProperty('reply');
  });

  it('allowlist: only senders in allowFrom, without any pairing code', async () => {
    const store = pairing();
    expect(await decideAccess(dm(), account({ dmPolicy: 'allowlist', allowFrom: ['42'] }), store, noCommand)).toEqual(run);
    expect(await decideAccess(dm(), account({ dmPolicy: 'allowlist', allowFrom: ['43'] }), store, noCommand))
      .toEqual({ action: 'block', reason: 'sender is not in allowFrom' });
    expect(await store.pending()).toEqual([]);
  });

  it('pairing: a listed sender runs, an unknown one gets a code once, a paired one runs', async () => {
    const store = pairing();
    expect(await decideAccess(dm({ peerId: '7', sender: { id: '7' } }), account({ allowFrom: ['7'] }), store, noCommand)).toEqual(run);

    const first = await decideAccess(dm(), account(), store, noCommand);
    expect(first).toMatchObject({ action: 'block', reason: 'pairing code issued' });
    const [pending] = await store.pending('telegram');
    expect(pending).toMatchObject({ channel: 'telegram', accountId: 'default', peerId: '42', name: 'Alice A' });
    expect((first as { reply: string }).reply).toBe([
      'Hi! This assistant only talks to people its owner has approved.',
      `Your pairing code: ${pending!.code} (valid for 1 hour).`,
      `Ask the owner to run: switchboard pairing approve telegram ${pending!.code}`,
    ].join('\n'));

    const again = await decideAccess(dm(), account(), store, noCommand);
    expect(again).toMatchObject({ action: 'block', reason: 'pairing code pending' });
    expect((again as { reply: string }).reply).toContain(pending!.code);
    expect(await store.pending()).toHaveLength(1);

    await store.approve('telegram', pending!.code);
    expect(await decideAccess(dm(), account(), store, noCommand)).toEqual(run);
  });

  it('pairing: the sender username is the name when there is no display name', async () => {
    const store = pairing();
    await decideAccess(dm({ sender: { id: '42', username: 'alice_u' } }), account(), store, noCommand);
    expect((await store.pending())[0]?.name).toBe('alice_u');
  });

  it('pairing: with three codes waiting, a fourth sender is told to try later and gets no code', async () => {
    const store = pairing();
    for (const id of ['1', '2', '3']) await decideAccess(dm({ peerId: id, sender: { id } }), account(), store, noCommand);
    const full = await decideAccess(dm({ peerId: '4', sender: { id: '4' } }), account(), store, noCommand);
    expect(full).toMatchObject({ action: 'block', reason: 'pairing queue full' });
    expect((full as { reply: string }).reply).toMatch(/not open to new people right now/);
    expect((full as { reply: string }).reply).not.toMatch(/code/i);
    expect((await store.pending()).map((p) => p.peerId)).toEqual(['1', '2', '3']);
  });

  it('pairing without a store: blocked, with no reply', async () => {
    expect(await decideAccess(dm(), account(), undefined, noCommand)).toEqual({ action: 'block', reason: 'pairing is unavailable' });
  });

  it('a paired peer is paired on its own channel only', async () => {
    const store = pairing();
    const { request } = await store.request('discord', 'default', '42') as { request: { code: string } };
    await store.approve('discord', request.code);
    expect(await decideAccess(dm(), account(), store, noCommand)).toMatchObject({ action: 'block', reason: 'pairing code issued' });
    expect(await decideAccess(dm({ channel: 'discord' }), account(), store, noCommand)).toEqual(run);
  });
});

describe('decideAccess: who is checked at all', () => {
  it.each(['webchat', 'cli', 'api', 'internal'] as const)('%s is trusted whatever the account says', async (channel) => {
    expect(await decideAccess(dm({ channel, sender: { id: '42', isBot: true } }), undefined, undefined, noCommand)).toEqual(run);
  });

  it('a platform message without an account configuration is blocked', async () => {
    expect(await decideAccess(dm({ accountId: 'other' }), undefined, undefined, noCommand))
      .toEqual({ action: 'block', reason: 'no configuration for telegram account other' });
  });

  it('bots are blocked in DMs and groups, even under open policies', async () => {
    const bot = { id: '42', isBot: true };
    expect(await decideAccess(dm({ sender: bot }), account({ dmPolicy: 'open' }), undefined, noCommand)).toEqual({ action: 'block', reason: 'message from a bot' });
    expect(await decideAccess(group({ sender: bot, mentionsBot: true }), account(), undefined, noCommand)).toEqual({ action: 'block', reason: 'message from a bot' });
  });
});

describe('decideAccess: groupPolicy and requireMention', () => {
  it('open: any group runs, the DM policy does not apply to groups', async () => {
    expect(await decideAccess(group(), account({ dmPolicy: 'disabled', groupPolicy: 'open' }), undefined, noCommand)).toEqual(run);
  });

  it('allowlist: only listed groups', async () => {
    expect(await decideAccess(group(), account({ groupPolicy: 'allowlist', groups: ['-100'] }), undefined, noCommand)).toEqual(run);
    expect(await decideAccess(group(), account({ groupPolicy: 'allowlist', groups: ['-200'] }), undefined, noCommand))
      .toEqual({ action: 'block', reason: 'group -100 is not in the allowlist' });
    expect(await decideAccess(group(), account({ groupPolicy: 'allowlist', groups: [] }), undefined, noCommand)).toMatchObject({ action: 'block' });
  });

  it('allowlist is checked before the mention: an unlisted group is blocked even when it mentions the bot', async () => {
    expect(await decideAccess(group({ mentionsBot: true }), account({ groupPolicy: 'allowlist', requireMention: true }), undefined, { isCommand: true }))
      .toMatchObject({ action: 'block' });
  });

  it('requireMention: skipped (kept as context) unless mentioned or a command', async () => {
    const acct = account({ requireMention: true });
    expect(await decideAccess(group(), acct, undefined, noCommand)).toEqual({ action: 'skip', reason: 'not mentioned' });
    expect(await decideAccess(group({ mentionsBot: true }), acct, undefined, noCommand)).toEqual(run);
    expect(await decideAccess(group(), acct, undefined, { isCommand: true })).toEqual(run);
    expect(await decideAccess(group(), account({ requireMention: false }), undefined, noCommand)).toEqual(run);
  });

  it('requireMention does not apply to direct messages', async () => {
    expect(await decideAccess(dm(), account({ dmPolicy: 'open', requireMention: true }), undefined, noCommand)).toEqual(run);
  });
});

describe('senderListed', () => {
  const m = dm({ sender: { id: 'U42', username: 'Alice' } });
  it.each([
    [['u42'], true], [['U42'], true], [[' U42 '], true], [['telegram:U42'], true], [['TELEGRAM:u42'], true],
    [['alice'], true], [['@Alice'], true], [['telegram:@alice'], true], [['*'], true], [[' * '], true],
    [['discord:U42'], false], [['U4'], false], [['U421'], false], [['bob', '@carol'], false], [[], false], [['@U42x'], false], [['Al@ice'], false],
  ])('%j → %s', (allowFrom, expected) => {
    expect(senderListed(m, allowFrom)).toBe(expected);
  });

  it('a sender without a username is matched by id only', () => {
    expect(senderListed(dm({ sender: { id: '42' } }), ['@42'])).toBe(false);
    expect(senderListed(dm({ sender: { id: '42' } }), ['alice'])).toBe(false);
    expect(senderListed(dm({ sender: { id: '42' } }), ['42'])).toBe(true);
  });
});

describe('groupAllowed', () => {
  const m = group({ channel: 'discord', groupId: 'C55', containerIds: ['G1'] });
  it.each([
    [['c55'], true], [[' C55 '], true], [['g1'], true], [['G1:C55'], true], [['*'], true],
    [['G2'], false], [['G2:C55'], false], [['G1:C56'], false], [['C5'], false], [[], false],
  ])('%j → %s', (groups, expected) => {
    expect(groupAllowed(m, groups)).toBe(expected);
  });

  it('a message without a group id is matched by its containers alone', () => {
    const noGroup = group({ channel: 'discord', groupId: undefined, containerIds: ['G1'] });
    expect(groupAllowed(noGroup, ['G1'])).toBe(true);
    expect(groupAllowed(noGroup, ['G2'])).toBe(false);
  });

  it('without containers only the group id counts', () => {
    expect(groupAllowed(group({ groupId: '-100' }), ['-100'])).toBe(true);
    expect(groupAllowed(group({ groupId: '-100' }), [':-100'])).toBe(false);
  });
});
