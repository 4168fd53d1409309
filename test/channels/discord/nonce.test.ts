import { Client } from 'discord.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discordNonce } from '../../../channels/discord/nonce.ts';
import { sendOverRest } from '../../../channels/discord/shard-leases.ts';
import type { DeliveryTarget } from '../../../src/core/message.ts';
import { snowflake } from '../../fakes/fake-discord.ts';
import { alice, ids, startDiscordWorld, type DiscordWorld } from './setup.ts';

describe('Discord nonces: a reply sent again is posted once', () => {
  it('derives a nonce of at most 25 characters from the message answered, the reply and the chunk', () => {
    expect(discordNonce('1300000000000000500', 'hello', 0)).toBe('3yNxa6xI-oTygsuzZPd7G-sdI');
    const nonces = new Set([
      discordNonce('1300000000000000500', 'hello', 0), discordNonce('1300000000000000500', 'hello', 1),
      discordNonce('1300000000000000501', 'hello', 0), discordNonce('1300000000000000500', 'hello!', 0),
    ]);
    expect(nonces.size).toBe(4);
    for (const nonce of nonces) expect(nonce).toHaveLength(25);
    expect(discordNonce(undefined, 'hello', 0)).toBeUndefined();
  });

  describe('through the real discord.js against the fake', () => {
    let world: DiscordWorld;
    beforeAll(async () => { world = await startDiscordWorld(); });
    afterAll(async () => { await world?.close(); });

    it('sends every chunk with a stable nonce and enforce_nonce; the same reply again creates no new message', async () => {
      const { discord, gw } = world;
      const id = snowflake();
      discord.message({ channel_id: ids.dm, content: 'hi', id, author: alice });
      const answer = await world.reply(ids.dm, (c) => c.body?.content === 'echo: hi');
      expect(answer.body?.enforce_nonce).toBe(true);
      // The gateway keys the reply with the delivery key and its index.
      expect(answer.body?.nonce).toBe(discordNonce(undefined, '', 0, `discord:default:${id}:0`));

      // A long reply (three chunks), sent twice as a replay after a crash would.
      const adapter = gw.adapters.find((a) => a.id === 'discord')!;
      const target: DeliveryTarget = { channel: 'discord', accountId: 'default', chatId: ids.dm, chatType: 'direct', replyToId: id, peerId: alice.id };
      const reply = { text: 'word '.repeat(1000).trim() };
      const before = discord.posts(ids.dm).length;
      await adapter.send(target, reply);
      const first = discord.posts(ids.dm).slice(before);
      expect(first).toHaveLength(3);
      const nonces = first.map((c) => c.body?.nonce);
      expect(new Set(nonces).size).toBe(3);
      expect(first.every((c) => c.body?.enforce_nonce === true && String(c.body?.nonce).length <= 25)).toBe(true);
      expect(discord.deduplicated).toBe(0);
      await adapter.send(target, reply);
      expect(discord.posts(ids.dm).slice(before + 3).map((c) => c.body?.nonce)).toEqual(nonces);
      expect(discord.deduplicated).toBe(3);
    });

    it('does the same over REST (cluster mode)', async () => {
      const { discord } = world;
      const client = new Client({ intents: [], rest: { api: discord.api } });
      client.rest.setToken(discord.token);
      const deduplicated = discord.deduplicated;
      const nonces = ['rest-nonce-a', 'rest-nonce-b'];
      await sendOverRest(client, ids.channel, ['one', 'two'], undefined, nonces);
      await sendOverRest(client, ids.channel, ['one', 'two'], undefined, nonces);
      const posts = discord.posts(ids.channel).slice(-4);
      expect(posts.map((c) => [c.body?.nonce, c.body?.enforce_nonce])).toEqual([['rest-nonce-a', true], ['rest-nonce-b', true], ['rest-nonce-a', true], ['rest-nonce-b', true]]);
      expect(discord.deduplicated - deduplicated).toBe(2);
    });
  });
});
