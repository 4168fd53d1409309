import sharp from 'sharp';
import { afterEach, describe, expect, it } from 'vitest';
import { lastUser } from '../../fakes/fake-openai.ts';
import { alice, ids, listedSessions, startDiscordWorld, type DiscordWorld } from './setup.ts';

const mention = `<@${ids.bot}>`;
const bot = { id: ids.bot, username: 'switchboard', bot: true };

describe('discord channel through the whole gateway (real discord.js against a fake Discord)', () => {
  let world: DiscordWorld | undefined;
  afterEach(async () => {
    await world?.close();
    world = undefined;
  });

  it('answers a DM in the DM channel, shows typing, and keys the session by dmScope', async () => {
    world = await startDiscordWorld({ session: { dmScope: 'per-channel-peer' } });
    world.discord.message({ channel_id: ids.dm, content: 'hello from a DM' });
    const reply = await world.reply(ids.dm);
    expect(reply.body?.content).toBe('echo: hello from a DM');
    expect(reply.body?.message_reference).toBeUndefined();
    expect(world.discord.calls.some((c) => c.method === 'POST' && c.path === `/api/v10/channels/${ids.dm}/typing`)).toBe(true);
    expect((await listedSessions(world.gw)).map((s) => s.key)).toEqual([`agent:main:discord:direct:${alice.id}`]);
  });

  it('uses the main session for DMs under the default dmScope', async () => {
    world = await startDiscordWorld();
    world.discord.message({ channel_id: ids.dm, content: 'hi' });
    await world.reply(ids.dm);
    expect((await listedSessions(world.gw)).map((s) => s.key)).toEqual(['agent:main:main']);
  });

  it('sends an unknown DM sender a pairing code under the default dmPolicy', async () => {
    world = await startDiscordWorld({ channels: { discord: { dmPolicy: 'pairing' } } });
    world.discord.message({ channel_id: ids.dm, content: 'let me in' });
    const reply = await world.reply(ids.dm);
    expect(reply.body?.content).toMatch(/pairing code: [A-Z0-9]{8}/i);
    expect(reply.body?.content).toContain('switchboard pairing approve discord');
    expect(world.openai.requests).toHaveLength(0);
  });

  it('in a guild channel answers only when mentioned, with the skipped messages as context', async () => {
    world = await startDiscordWorld();
    world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: 'the build is red again' });
    const asked = world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: `${mention} what should we do?`, mentions: [bot] });
    const reply = await world.reply(ids.channel);
    expect(world.discord.posts(ids.channel)).toHaveLength(1);
    expect(reply.body?.message_reference).toMatchObject({ message_id: asked.id });
    const request = world.openai.requests[0]!;
    expect(lastUser(request)).toContain('what should we do?');
    expect(lastUser(request)).not.toContain(mention);
    expect(JSON.stringify(request.body.messages)).toContain('the build is red again');
    expect((await listedSessions(world.gw)).map((s) => s.key)).toEqual([`agent:main:discord:channel:${ids.channel}`]);
  });

  it('treats a mention of the bot role and a reply to the bot as addressing it', async () => {
    world = await startDiscordWorld();
    world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: `<@&${ids.botRole}> role ping`, mention_roles: [ids.botRole] });
    await world.reply(ids.channel, (c) => c.body?.content === 'echo: role ping');
    const earlier = { id: '1200000000000000001', channel_id: ids.channel, author: { ...bot, discriminator: '0', avatar: null, global_name: null }, content: 'an earlier answer', timestamp: new Date().toISOString(), edited_timestamp: null, tts: false, mention_everyone: false, mentions: [], mention_roles: [], attachments: [], embeds: [], pinned: false, type: 0 };
    world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: 'a follow-up', referenced_message: earlier });
    const reply = await world.reply(ids.channel, (c) => String(c.body?.content).startsWith('echo:') && String(c.body?.content).includes('a follow-up'));
    expect(reply.body?.content).toContain('a follow-up');
  });

  it('gives a thread its own session with the channel as parent, and replies in the thread', async () => {
    world = await startDiscordWorld();
    world.discord.message({ channel_id: ids.thread, guild_id: ids.guild, channel_type: 11, content: `${mention} in the thread`, mentions: [bot] });
    const reply = await world.reply(ids.thread);
    expect(reply.body?.content).toBe('echo: in the thread');
    expect(world.discord.posts(ids.channel)).toHaveLength(0);
    const sessions = await listedSessions(world.gw);
    expect(sessions).toEqual([expect.objectContaining({
      key: `agent:main:discord:channel:${ids.channel}:thread:${ids.thread}`,
      parentKey: `agent:main:discord:channel:${ids.channel}`,
    })]);
  });

  it('shares the parent channel session with threads under session.threads "parent"', async () => {
    world = await startDiscordWorld({ session: { threads: 'parent' } });
    world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: `${mention} first in the channel`, mentions: [bot] });
    await world.reply(ids.channel);
    world.discord.message({ channel_id: ids.thread, guild_id: ids.guild, channel_type: 11, content: `${mention} then in the thread`, mentions: [bot] });
    const reply = await world.reply(ids.thread);
    expect(reply.body?.content).toBe('echo: then in the thread');
    expect((await listedSessions(world.gw)).map((s) => s.key)).toEqual([`agent:main:discord:channel:${ids.channel}`]);
    const history = world.openai.requests[1]!.body.messages.map((m) => m.content).join('\n');
    expect(history).toContain('first in the channel');
  });

  it('splits a 4500-character reply with a code block into balanced chunks of at most 2000', async () => {
    world = await startDiscordWorld();
    const intro = 'Here is the whole module, as asked. '.repeat(14).trim();
    const code = Array.from({ length: 100 }, (_, i) => `  const value${String(i).padStart(2, '0')} = compute(${i}, "x");`).join('\n');
    const outro = 'That is all; run it with node and tell me what it prints. '.repeat(8).trim();
    const text = `${intro}\n\n\`\`\`ts\n${code}\n\`\`\`\n\n${outro}`;
    expect(text.length).toBeGreaterThanOrEqual(4500);
    world.openai.script.push({ content: text });
    world.discord.message({ channel_id: ids.dm, content: 'show me the module' });
    await world.reply(ids.dm, (c) => String(c.body?.content).includes('tell me what it prints'));
    const chunks = world.discord.posts(ids.dm).map((c) => String(c.body?.content));
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(2000);
      expect(chunk.split('\n').filter((l) => l.startsWith('```')).length % 2).toBe(0);
    }
    expect(chunks[1]!.startsWith('```ts\n')).toBe(true);
    const rejoined = chunks.join('\n').replace(/\n```\n```ts\n/g, '\n');
    expect(rejoined.replace(/\s+/g, ' ')).toBe(text.replace(/\s+/g, ' '));
  });

  it('never lets model output ping @everyone, @here or roles', async () => {
    world = await startDiscordWorld();
    world.openai.script.push({ content: 'Hey @everyone and @here, <@&123456789012345678> look!' });
    world.discord.message({ channel_id: ids.channel, guild_id: ids.guild, content: `${mention} announce it`, mentions: [bot] });
    const reply = await world.reply(ids.channel);
    expect(reply.body?.content).toBe('Hey @everyone and @here, <@&123456789012345678> look!');
    expect(reply.body?.allowed_mentions).toMatchObject({ parse: [] });
  });

  it('answers a duplicate MESSAGE_CREATE once', async () => {
    world = await startDiscordWorld();
    const first = world.discord.message({ channel_id: ids.dm, content: 'only once please' });
    world.discord.dispatch('MESSAGE_CREATE', first);
    world.discord.message({ channel_id: ids.dm, content: 'second message' });
    await world.reply(ids.dm, (c) => c.body?.content === 'echo: second message');
    expect(world.discord.posts(ids.dm).map((c) => c.body?.content)).toEqual(['echo: only once please', 'echo: second message']);
    expect(world.openai.requests).toHaveLength(2);
  });

  it('ignores a guild that is not in the allowlist', async () => {
    world = await startDiscordWorld();
    world.discord.message({ channel_id: ids.otherChannel, guild_id: ids.otherGuild, content: `${mention} hello?`, mentions: [bot] });
    world.discord.message({ channel_id: ids.dm, content: 'after the stranger' });
    await world.reply(ids.dm);
    expect(world.discord.calls.filter((c) => c.path.includes(ids.otherChannel))).toHaveLength(0);
    expect(world.openai.requests).toHaveLength(1);
  });

  it('allows a guild channel listed as guildId:channelId', async () => {
    world = await startDiscordWorld({ channels: { discord: { guilds: [`${ids.otherGuild}:${ids.otherChannel}`] } } });
    world.discord.message({ channel_id: ids.otherChannel, guild_id: ids.otherGuild, content: `${mention} hello?`, mentions: [bot] });
    expect((await world.reply(ids.otherChannel)).body?.content).toBe('echo: hello?');
  });

  it('retries a reply that Discord answered with 429 (the REST queue waits retry_after)', async () => {
    world = await startDiscordWorld();
    world.discord.rateLimitOnce((method, path) => method === 'POST' && path === `/api/v10/channels/${ids.dm}/messages`, 0.05);
    world.discord.message({ channel_id: ids.dm, content: 'rate limit me' });
    await world.reply(ids.dm);
    const attempts = world.discord.calls.filter((c) => c.method === 'POST' && c.path === `/api/v10/channels/${ids.dm}/messages`);
    expect(attempts.map((c) => c.status)).toEqual([429, 200]);
    expect(attempts.map((c) => c.body?.content)).toEqual(['echo: rate limit me', 'echo: rate limit me']);
  });

  it("gives the agent an attachment fetched from Discord's CDN", async () => {
    world = await startDiscordWorld();
    const png = await sharp({ create: { width: 40, height: 30, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0.5 } } }).png().toBuffer();
    const attachment = world.discord.addAttachment({ name: 'chart.png', bytes: png, contentType: 'image/png', width: 40, height: 30 });
    world.discord.message({ channel_id: ids.dm, content: 'what is this?', attachments: [attachment] });
    await world.reply(ids.dm);
    const request = world.openai.requests[0]!;
    expect(lastUser(request)).toContain('what is this?');
    // gpt-test is not known to see: the image is its line, made from the fetched bytes (PNG with alpha, 40×30).
    expect(lastUser(request)).toMatch(/what is this\?\n\[image: image\/png 40×30, [\d.]+ (B|KB)\]/);
    expect(world.discord.downloads).toHaveLength(1);
  });

  it('lists an attachment whose URL is not on a Discord host, without fetching it', async () => {
    world = await startDiscordWorld();
    world.discord.message({
      channel_id: ids.dm, content: 'what is this?',
      attachments: [{ id: '8000000000000000001', filename: 'chart.png', size: 2048, url: 'https://cdn.example/chart.png', proxy_url: 'https://media.example/chart.png', content_type: 'image/png' }],
    });
    await world.reply(ids.dm);
    expect(lastUser(world.openai.requests[0]!)).toContain('[file: chart.png, image/png: could not be downloaded]');
  });
});
