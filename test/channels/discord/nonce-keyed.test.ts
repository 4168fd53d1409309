import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discordNonce } from '../../../channels/discord/nonce.ts';
import type { ChannelAdapter } from '../../../src/core/channel-adapter.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import type { DeliveryTarget, InboundMessage, OutboundMessage } from '../../../src/core/message.ts';
import { Outbound } from '../../../src/gateway/outbound.ts';
import { alice, ids, startDiscordWorld, type DiscordWorld } from './setup.ts';

describe('Discord nonces from the reply\'s idempotency key (delivery key and reply index)', () => {
  it('derives the nonce from the key when there is one, from the text otherwise', () => {
    expect(discordNonce('1300000000000000500', 'hello', 0, 'discord:default:1300000000000000500:0')).toBe('obJDvdXcgVUqGGSSnbmvf9g-j');
    expect(discordNonce('1300000000000000500', 'hello', 0, 'discord:default:1300000000000000500:1')).toBe('ifJ10RSUiYasitvu_tZfVURO2');
    expect(discordNonce('1300000000000000500', 'hello', 0)).toBe('3yNxa6xI-oTygsuzZPd7G-sdI');
  });

  it('the gateway keys each reply of a platform message with <delivery key>:<index>, the same on a resend', async () => {
    const seen: OutboundMessage[] = [];
    const adapter = { id: 'discord', accountId: 'default', status: 'running', start: async () => {}, stop: async () => {}, send: async (_t: DeliveryTarget, m: OutboundMessage) => { seen.push(m); } } as unknown as ChannelAdapter;
    const outbound = new Outbound({});
    outbound.add(adapter);
    const message = { channel: 'discord', accountId: 'default', id: '1300000000000000777', chatId: ids.dm, chatType: 'direct', senderId: alice.id, text: 'hi', receivedAt: 0 } as unknown as InboundMessage;
    const replies = [{ text: 'same' }, { text: 'same' }];
    await outbound.deliverReplies(message, replies, silentLogger(), false, 0);
    // A replay after a crash that had sent the first reply: only the second again, with its own key.
    await outbound.deliverReplies(message, replies, silentLogger(), false, 1);
    expect(seen.map((m) => m.idempotencyKey)).toEqual([
      'discord:default:1300000000000000777:0', 'discord:default:1300000000000000777:1', 'discord:default:1300000000000000777:1',
    ]);
  });

  describe('through the real discord.js against the fake', () => {
    let world: DiscordWorld;
    beforeAll(async () => { world = await startDiscordWorld(); });
    afterAll(async () => { await world?.close(); });

    it('two identical replies to two different messages get different nonces and both post', async () => {
      const { discord } = world;
      const first = '1300000000000000901';
      const second = '1300000000000000902';
      const before = discord.posts(ids.dm).length;
      discord.message({ channel_id: ids.dm, content: 'twice', id: first, author: alice });
      await world.reply(ids.dm, (c) => c.body?.content === 'echo: twice');
      discord.message({ channel_id: ids.dm, content: 'twice', id: second, author: alice });
      await world.reply(ids.dm, (c) => c.body?.content === 'echo: twice' && c.body?.nonce === 'O806sKfYtDbr5_AHKNHB-StR3');
      const posts = discord.posts(ids.dm).slice(before).filter((c) => c.body?.content === 'echo: twice');
      expect(posts).toHaveLength(2);
      expect(posts.map((c) => c.body?.nonce)).toEqual(['4bat9_8Nzpv4W6XmNRfZFeez-', 'O806sKfYtDbr5_AHKNHB-StR3']);
    });

    it('two equal replies of one turn both post; the same reply resent after a crash carries the same nonce and posts once', async () => {
      const { discord, gw } = world;
      const adapter = gw.adapters.find((a) => a.id === 'discord')!;
      const source = '1300000000000000903';
      const target: DeliveryTarget = { channel: 'discord', accountId: 'default', chatId: ids.dm, chatType: 'direct', replyToId: source, peerId: alice.id };
      const before = discord.posts(ids.dm).length;
      const deduplicated = discord.deduplicated;
      await adapter.send(target, { text: 'done', idempotencyKey: `discord:default:${source}:0` });
      await adapter.send(target, { text: 'done', idempotencyKey: `discord:default:${source}:1` });
      expect(discord.deduplicated).toBe(deduplicated);
      await adapter.send(target, { text: 'done', idempotencyKey: `discord:default:${source}:1` });
      const posts = discord.posts(ids.dm).slice(before);
      expect(posts.map((c) => c.body?.nonce)).toEqual(['dIdYV2wZzuhqEW2pR8xPAN4PP', 'zj41ihCGcvaFKlRa9gQPEY8zT', 'zj41ihCGcvaFKlRa9gQPEY8zT']);
      expect(discord.deduplicated - deduplicated).toBe(1);
    });
  });
});
