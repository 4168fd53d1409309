import { Writable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDiscordChannel } from '../../../channels/discord/index.ts';
import { createTelegramChannel } from '../../../channels/telegram/index.ts';
import { createWebchatChannel } from '../../../channels/webchat/index.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { createLogger } from '../../../src/core/logger.ts';
import { processGuardStats } from '../../../src/core/process-guard.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { snowflake, startFakeDiscord, type FakeDiscord } from '../../fakes/fake-discord.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { startTestGateway, tempDir, testConfig } from '../../helpers/gateway.ts';
import { junk, mutated } from '../../helpers/mutations.ts';
import { alice, ids } from './setup.ts';

const mallory = { id: '2000000000000000077', username: 'mallory', discriminator: '0', global_name: null, avatar: null, bot: false };
const bot = { ...mallory, id: '2000000000000000078', username: 'another-bot', bot: true };
const at = '2026-01-01T00:00:00.000Z';
const message = (fields: Record<string, unknown>) => ({
  id: '1300000000000000500', channel_id: ids.otherChannel, guild_id: ids.otherGuild, author: mallory, content: 'hello there', timestamp: at,
  edited_timestamp: null, tts: false, mention_everyone: false, mentions: [], mention_roles: [], attachments: [], embeds: [], pinned: false,
  type: 0, member: { roles: [], joined_at: at, deaf: false, mute: false, flags: 0 }, ...fields,
});
const guild = { id: '4000000000000000055', name: 'g', owner_id: mallory.id, roles: [{ id: '4000000000000000055', name: '@everyone', permissions: '0', position: 0, color: 0, hoist: false, managed: false, mentionable: false, flags: 0 }], emojis: [], features: [], channels: [{ id: '5000000000000000055', type: 0, name: 'c', position: 0, permission_overwrites: [] }], threads: [], members: [], joined_at: at, member_count: 1, unavailable: false };

/** Well-formed payloads of the dispatch events a bot receives; the fuzzer breaks them. */
const TEMPLATES: [string, unknown][] = [
  ['MESSAGE_CREATE', message({})],
  ['MESSAGE_CREATE', message({ channel_id: ids.channel, guild_id: ids.guild, author: bot })],
  ['MESSAGE_CREATE', { ...message({ channel_id: '3000000000000000099' }), guild_id: undefined, member: undefined }],
  ['MESSAGE_UPDATE', { id: '1300000000000000500', channel_id: ids.otherChannel, guild_id: ids.otherGuild, content: 'edited', edited_timestamp: at, author: mallory }],
  ['MESSAGE_DELETE', { id: '1300000000000000500', channel_id: ids.otherChannel, guild_id: ids.otherGuild }],
  ['MESSAGE_DELETE_BULK', { ids: ['1300000000000000500'], channel_id: ids.otherChannel, guild_id: ids.otherGuild }],
  ['MESSAGE_REACTION_ADD', { user_id: mallory.id, channel_id: ids.otherChannel, message_id: '1300000000000000500', guild_id: ids.otherGuild, emoji: { id: null, name: '👍' } }],
  ['GUILD_CREATE', guild],
  ['GUILD_UPDATE', { ...guild, name: 'renamed' }],
  ['GUILD_DELETE', { id: guild.id, unavailable: true }],
  ['CHANNEL_CREATE', { id: '5000000000000000056', type: 0, guild_id: ids.otherGuild, name: 'new', position: 1, permission_overwrites: [] }],
  ['CHANNEL_UPDATE', { id: ids.otherChannel, type: 0, guild_id: ids.otherGuild, name: 'renamed', position: 0, permission_overwrites: [] }],
  ['CHANNEL_DELETE', { id: '5000000000000000056', type: 0, guild_id: ids.otherGuild }],
  ['THREAD_CREATE', { id: '6000000000000000056', type: 11, guild_id: ids.otherGuild, parent_id: ids.otherChannel, name: 't', thread_metadata: { archived: false, auto_archive_duration: 60, archive_timestamp: at, locked: false } }],
  ['GUILD_MEMBER_ADD', { guild_id: ids.otherGuild, user: mallory, roles: [], joined_at: at, deaf: false, mute: false, flags: 0 }],
  ['GUILD_ROLE_CREATE', { guild_id: ids.otherGuild, role: { id: '7000000000000000055', name: 'r', permissions: '0', position: 1, color: 0, hoist: false, managed: false, mentionable: false, flags: 0 } }],
  ['TYPING_START', { channel_id: ids.otherChannel, guild_id: ids.otherGuild, user_id: mallory.id, timestamp: 1 }],
  ['PRESENCE_UPDATE', { user: { id: mallory.id }, guild_id: ids.otherGuild, status: 'online', activities: [], client_status: {} }],
  ['INTERACTION_CREATE', { id: '1300000000000000600', application_id: ids.bot, type: 2, token: 'tok', version: 1, channel_id: ids.otherChannel, guild_id: ids.otherGuild, member: { user: mallory, roles: [], permissions: '0', joined_at: at }, data: { id: '1', name: 'x', type: 1 } }],
  ['RESUMED', {}],
];

/** One gateway dispatch: a known event with its payload broken, or an unknown event with anything. */
const frame = fc.oneof(
  { weight: 9, arbitrary: fc.constantFrom(...TEMPLATES).chain(([t, d]) => mutated(d).map((data) => ({ t, d: data }))) },
  { weight: 1, arbitrary: fc.record({ t: fc.oneof(fc.constantFrom(...TEMPLATES.map(([t]) => t)), fc.string({ maxLength: 12 })), d: junk }) },
);

describe('discord intake under malformed gateway frames (real discord.js against the fake gateway)', () => {
  let discord: FakeDiscord;
  let telegram: FakeTelegram;
  let openai: FakeOpenAI;
  let gw: RunningGateway;
  let tmp: ReturnType<typeof tempDir>;
  const logged = new Map<string, number>();
  let probes = 0;
  const guardBefore = { ...processGuardStats };

  beforeAll(async () => {
    discord = await startFakeDiscord({
      bot: { id: ids.bot, username: 'switchboard', bot: true },
      guilds: [{ id: ids.guild, channels: [{ id: ids.channel }] }, { id: ids.otherGuild, channels: [{ id: ids.otherChannel }] }],
    });
    openai = await startFakeOpenAI();
    telegram = await startFakeTelegram();
    tmp = tempDir('switchboard-discord-fuzz-');
    const channels = { discord: { dmPolicy: 'allowlist', allowFrom: [alice.id], guilds: [ids.guild] }, telegram: { dmPolicy: 'open' } };
    const config = testConfig(tmp.dir, { providers: { default: { maxRetries: 0 } }, channels }, {
      DISCORD_BOT_TOKEN: discord.token, DISCORD_API_BASE: discord.api, TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot,
      OPENAI_BASE_URL: openai.baseURL, OPENAI_API_KEY: 'sk-test', OPENAI_MODEL: 'gpt-test',
    });
    const logger = createLogger({
      level: 'warn',
      destination: new Writable({ write(chunk, _e, done) { const msg = String(JSON.parse(String(chunk)).msg); logged.set(msg, (logged.get(msg) ?? 0) + 1); done(); } }),
    });
    const adapter = createDiscordChannel({ account: config.channels.discord[0]!, clock: systemClock, logger, stateDir: config.stateDir, restartBackoff: { baseMs: 20, maxMs: 200 } });
    gw = await startTestGateway({
      dir: tmp.dir, logger,
      adapters: [adapter, createWebchatChannel({ clock: systemClock }), createTelegramChannel({ account: config.channels.telegram[0]!, clock: systemClock, logger, stateDir: config.stateDir })],
      // A turn still running at the end need not be waited for (the default grace is 10 s; this hook has 20).
      config: { gateway: { shutdownGraceMs: 1000 }, providers: { default: { maxRetries: 0 } }, channels },
      env: { OPENAI_BASE_URL: openai.baseURL, OPENAI_API_KEY: 'sk-test', OPENAI_MODEL: 'gpt-test' },
    });
  });

  afterAll(async () => {
    await gw?.stop();
    await discord?.close();
    await telegram?.close();
    await openai?.close();
    tmp?.remove();
  });

  /** A DM from an allowed user must still be answered in the DM. */
  async function probe(): Promise<void> {
    const text = `probe ${++probes}`;
    // After a reconnect the client may be between two connections for a moment: the probe goes on the next one.
    await expect.poll(() => discord.connected, { timeout: 10_000 }).toBe(true);
    discord.message({ channel_id: ids.dm, content: text, id: snowflake() });
    const reply = await discord.waitForCall((c) => c.method === 'POST' && c.status === 200 && c.path === `/api/v10/channels/${ids.dm}/messages` && c.body?.content === `echo: ${text}`, 10_000);
    expect(reply.body?.content).toBe(`echo: ${text}`);
  }

  /** The web chat and another platform channel (Telegram, polling) still answer. */
  async function othersAnswer(): Promise<void> {
    const web = await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'web', text: 'still there?' }) });
    expect(web.status).toBe(200);
    expect(((await web.json()) as { reply: string }).reply).toBe('echo: still there?');
    const text = `telegram probe ${++probes}`;
    telegram.pushUpdate({ message: { message_id: probes, date: 1, chat: { id: 4242, type: 'private' }, from: { id: 4242, is_bot: false, first_name: 'Tom' }, text } });
    await telegram.waitFor('sendMessage', (c) => c.body.text === `echo: ${text}`, 10_000);
  }

  it('drops or survives thousands of malformed dispatches, and the channel and the others keep answering', async () => {
    await probe();
    let frames = 0;
    await fc.assert(fc.asyncProperty(fc.array(frame, { minLength: 50, maxLength: 50 }), async (batch) => {
      for (const f of batch) {
        discord.dispatch(f.t, f.d);
        frames++;
      }
      await probe();
    }), { numRuns: 50, seed: 16_001, endOnFailure: true });
    expect(frames).toBe(2500);
    await othersAnswer();
    expect(gw.adapters[0]!.status).toBe('running');
    expect(processGuardStats).toEqual(guardBefore);
    // Most malformed frames are dropped before discord.js sees them.
    expect(logged.get('discord: dropped a malformed gateway event') ?? 0).toBeGreaterThan(1000);
  }, 120_000);

  it('survives frames that are not JSON dispatches at all', async () => {
    for (const raw of ['', 'not json', '[]', 'null', '{"op":0}', '{"op":0,"t":"MESSAGE_CREATE"}', '{"op":0,"t":"MESSAGE_CREATE","d":null,"s":"x"}', '{"op":"x"}', '{"op":0,"t":"GUILD_CREATE","d":[]}']) {
      discord.sendRaw(raw);
    }
    await probe();
    expect(processGuardStats).toEqual(guardBefore);
  }, 30_000);

  it('drops gateway-level frames with null or malformed data (READY, HELLO) before @discordjs/ws reads them, and takes an INVALID_SESSION without a boolean as not resumable', async () => {
    const dropped = () => logged.get('discord: dropped a malformed gateway event') ?? 0;
    const failed = () => logged.get('discord: discord.js failed on a gateway event; the channel goes on') ?? 0;
    const droppedBefore = dropped();
    const failedBefore = failed();
    const frames = [
      '{"op":0,"t":"READY","s":9001,"d":null}', '{"op":0,"t":"READY","s":9002,"d":{}}', '{"op":0,"t":"READY","d":{"user":null,"session_id":"s","guilds":"x"}}',
      '{"op":0,"t":"READY","d":{"user":{"id":"1"},"session_id":"s","guilds":null}}',
      '{"op":10,"d":null}', '{"op":10,"d":{}}', '{"op":10,"d":{"heartbeat_interval":"x"}}', '{"op":10,"d":{"heartbeat_interval":-1}}',
    ];
    for (const raw of frames) discord.sendRaw(raw);
    await probe();
    expect(dropped() - droppedBefore).toBe(frames.length);
    // INVALID_SESSION: the shard reconnects with a fresh session instead of throwing on `d.toString()`.
    for (const d of ['null', '"yes"']) {
      const identifies = discord.identifies;
      discord.sendRaw(`{"op":9,"d":${d}}`);
      await expect.poll(() => discord.identifies, { timeout: 10_000 }).toBeGreaterThan(identifies);
      await probe();
    }
    expect(processGuardStats).toEqual(guardBefore);
    expect(failed() - failedBefore).toBe(0);
    expect(gw.adapters[0]!.status).toBe('running');
    await othersAnswer();
  }, 60_000);
});
