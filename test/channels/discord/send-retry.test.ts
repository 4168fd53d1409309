import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChannelAdapter } from '../../../src/core/channel-adapter.ts';
import type { DeliveryTarget } from '../../../src/core/message.ts';
import { ids, startDiscordWorld, type DiscordWorld } from './setup.ts';

/** Discord REST sends that Discord did not take are tried again (SPEC §16), through the real discord.js. */
describe('Discord delivery: what Discord did not take is sent again', () => {
  let world: DiscordWorld;
  let adapter: ChannelAdapter;
  const target: DeliveryTarget = { channel: 'discord', accountId: 'default', chatId: ids.channel, chatType: 'group' };
  const isPost = (method: string, path: string) => method === 'POST' && path === `/api/v10/channels/${ids.channel}/messages`;

  beforeEach(async () => {
    world = await startDiscordWorld({ delivery: { maxAttempts: 8, retryBaseMs: 1, retryMaxMs: 4 } });
    adapter = world.gw.adapters.find((a) => a.id === 'discord')!;
  });
  afterEach(async () => {
    await world.close();
  });

  it('a send whose connection was reset twice is posted once, with the same nonce each time', async () => {
    const nonces: unknown[] = [];
    world.discord.resetConnection = (method, path, body) => {
      if (!isPost(method, path)) return false;
      nonces.push(body?.nonce);
      return nonces.length <= 2;
    };
    await adapter.send(target, { text: 'through a flaky link', idempotencyKey: 'discord:default:m1:0' });
    expect(world.discord.resets).toBe(2);
    expect(world.discord.posts(ids.channel).map((c) => c.body?.content)).toEqual(['through a flaky link']);
    expect(new Set(nonces).size).toBe(1);
    expect(nonces[0]).toEqual(expect.any(String));
  });

  it('5xx answers beyond discord.js\'s own immediate retries are tried again after a backoff', async () => {
    for (let i = 0; i < 6; i++) world.discord.failOnce(isPost, 503);
    await adapter.send(target, { text: 'after the outage' });
    const attempts = world.discord.calls.filter((c) => isPost(c.method, c.path));
    expect(attempts.map((c) => c.status)).toEqual([503, 503, 503, 503, 503, 503, 200]);
    expect(world.discord.posts(ids.channel)).toHaveLength(1);
  });

  it('a 4xx refusal (a channel the bot cannot see) is not retried and reaches the caller', async () => {
    world.discord.resetConnection = undefined;
    const other: DeliveryTarget = { ...target, chatId: '5999999999999999999' };
    await expect(adapter.send(other, { text: 'nowhere' })).rejects.toThrow();
    const attempts = world.discord.calls.filter((c) => c.path.includes('5999999999999999999'));
    expect(attempts).toHaveLength(1);
  });
});
