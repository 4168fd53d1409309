import { afterEach, describe, expect, it } from 'vitest';
import { discordReactionPath } from '../../../channels/discord/react.ts';
import { ids, startDiscordWorld, type DiscordWorld } from './setup.ts';

const mention = `<@${ids.bot}>`;
const bot = { id: ids.bot, username: 'switchboard', bot: true };
/** `PUT …/reactions/:emoji/@me` calls (the fake records the path decoded). */
const reactionPath = /^\/api\/v10\/channels\/(\d+)\/messages\/(\d+)\/reactions\/([^/]+)\/@me$/;

describe('Discord ack reaction (real discord.js against a fake Discord)', () => {
  let world: DiscordWorld | undefined;
  afterEach(async () => {
    await world?.close();
    world = undefined;
  });
  const reactions = () => world!.discord.calls.filter((c) => c.method === 'PUT' && reactionPath.test(c.path));

  it('puts 👀 on a guild message that triggers a run; none on one that does not, none in a DM', async () => {
    world = await startDiscordWorld();
    world.discord.message({ channel_id: ids.dm, content: 'a DM first' });
    await world.reply(ids.dm);
    world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: 'just chatting' });
    const asked = world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: `${mention} what now?`, mentions: [bot] });
    await world.reply(ids.channel);
    const reaction = await world.discord.waitForCall((c) => c.method === 'PUT' && reactionPath.test(c.path));
    expect(reaction.path).toBe(`/api/v10/channels/${ids.channel}/messages/${String(asked.id)}/reactions/👀/@me`);
    expect(reaction.status).toBe(204);
    expect(reactions()).toHaveLength(1);
  });

  it('"" turns it off', async () => {
    world = await startDiscordWorld({ channels: { discord: { ackReaction: '' } } });
    world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: `${mention} quiet please`, mentions: [bot] });
    await world.reply(ids.channel);
    expect(reactions()).toEqual([]);
  });

  it('a failing reaction does not fail the turn', async () => {
    world = await startDiscordWorld({ delivery: { maxAttempts: 1 } });
    world.discord.failOnce((method, path) => method === 'PUT' && reactionPath.test(path), 403);
    world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: `${mention} are you ok?`, mentions: [bot] });
    const reply = await world.reply(ids.channel);
    expect(reply.body?.content).toBe('echo: are you ok?');
    expect(reactions().map((c) => c.status)).toEqual([403]);
  });

  it('writes a custom emoji as name:id and encodes Unicode for the route', () => {
    expect(discordReactionPath('<:party:123456789012345678>')).toBe('party%3A123456789012345678');
    expect(discordReactionPath('👀')).toBe(encodeURIComponent('👀'));
  });
});
