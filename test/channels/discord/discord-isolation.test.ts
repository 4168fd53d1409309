import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createDiscordChannel } from '../../../channels/discord/index.ts';
import { dispatchProblem } from '../../../channels/discord/packet-guard.ts';
import type { ChannelAdapter, Submission } from '../../../src/core/channel-adapter.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { createLogger } from '../../../src/core/logger.ts';
import type { InboundMessage } from '../../../src/core/message.ts';
import { startFakeDiscord, snowflake, type FakeDiscord } from '../../fakes/fake-discord.ts';

/** Timers that fire when the test says so. */
class Timers {
  pending: { fn: () => void; ms: number }[] = [];
  setTimeout = (fn: () => void, ms: number): unknown => {
    const t = { fn, ms };
    this.pending.push(t);
    return t;
  };
  clearTimeout = (handle: unknown): void => {
    this.pending = this.pending.filter((t) => t !== handle);
  };
  fire(): void {
    const due = this.pending;
    this.pending = [];
    for (const t of due) t.fn();
  }
}

async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const guildId = '4000000000000000001';
const channelId = '5000000000000000001';
const author = { id: '2000000000000000002', username: 'alice', discriminator: '0', global_name: null, avatar: null };
const at = '2026-01-01T00:00:00.000Z';
const valid = (content: string) => ({
  id: snowflake(), channel_id: channelId, guild_id: guildId, author, content, timestamp: at, edited_timestamp: null, tts: false,
  mention_everyone: false, mentions: [], mention_roles: [], attachments: [], embeds: [], pinned: false, type: 0,
  member: { roles: [], joined_at: at, deaf: false, mute: false, flags: 0 },
});

describe('discord channel isolation', () => {
  let fake: FakeDiscord;
  let adapter: ChannelAdapter | undefined;
  const received: InboundMessage[] = [];
  const lines: Record<string, unknown>[] = [];
  const timers = new Timers();
  const clock = new ManualClock();

  afterEach(async () => {
    await adapter?.stop();
    adapter = undefined;
    await fake?.close();
    received.length = 0;
    lines.length = 0;
    timers.pending = [];
  });

  async function start(): Promise<ChannelAdapter> {
    fake = await startFakeDiscord({ guilds: [{ id: guildId, channels: [{ id: channelId }] }] });
    const logger = createLogger({ level: 'debug', destination: new Writable({ write(c, _e, done) { lines.push(JSON.parse(String(c)) as Record<string, unknown>); done(); } }) });
    adapter = createDiscordChannel({
      account: { accountId: 'default', enabled: true, token: fake.token, apiBase: fake.api, dmPolicy: 'open', allowFrom: [], groupPolicy: 'allowlist', groups: [], requireMention: false },
      clock, logger, stateDir: '/nonexistent', timers, restartBackoff: { baseMs: 1000, maxMs: 8000, windowMs: 60_000 },
    });
    await adapter.start(async (m): Promise<Submission> => {
      received.push(m);
      return { status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) };
    });
    return adapter;
  }

  it('drops the malformed events of the issue before discord.js sees them, and takes the next message', async () => {
    await start();
    const broken: [string, unknown][] = [
      ['MESSAGE_CREATE', null], ['MESSAGE_CREATE', { ...valid('x'), author: null }], ['MESSAGE_CREATE', { ...valid('x'), id: 5, channel_id: {} }],
      ['MESSAGE_CREATE', 'text'], ['GUILD_CREATE', null], ['MESSAGE_DELETE', null], ['TYPING_START', 'x'], ['CHANNEL_CREATE', { id: null }],
      ['GUILD_MEMBER_ADD', {}], ['MESSAGE_REACTION_ADD', { user_id: null }], ['THREAD_CREATE', []],
    ];
    for (const [t, d] of broken) fake.dispatch(t, d);
    fake.dispatch('MESSAGE_CREATE', valid('after the junk'));
    await until(() => received.length === 1);
    expect(received[0]!.text).toBe('after the junk');
    const dropped = lines.filter((l) => l.msg === 'discord: dropped a malformed gateway event');
    expect(dropped).toHaveLength(broken.length);
    expect(dropped[0]).toMatchObject({ channel: 'discord', event: 'MESSAGE_CREATE', reason: 'its data is null, not an object' });
    expect(adapter!.status).toBe('running');
    expect(timers.pending).toHaveLength(0);
  });

  it('restarts a client that discord.js failed on, with backoff, and goes on receiving', async () => {
    await start();
    fake.dispatch('GUILD_CREATE', { id: '4000000000000000003', channels: [null] }); // well-formed enough, then discord.js throws
    await until(() => timers.pending.length === 1);
    expect(timers.pending[0]!.ms).toBe(1000);
    expect(lines.find((l) => l.msg === 'discord: discord.js failed on a gateway event; the channel goes on')).toMatchObject({ event: 'GUILD_CREATE', err: { message: expect.stringContaining('null') } });
    // The old client serves until the new one is ready.
    fake.dispatch('MESSAGE_CREATE', valid('before the restart'));
    await until(() => received.length === 1);
    timers.fire();
    await until(() => fake.identifies === 2 && lines.some((l) => l.msg === 'discord: client restarted'));
    expect(adapter!.status).toBe('running');
    expect(adapter!.statusDetail).toBeUndefined();
    fake.dispatch('MESSAGE_CREATE', valid('after the restart'));
    await until(() => received.length === 2);
    expect(received[1]!.text).toBe('after the restart');
    // A second failure soon after waits twice as long; one after a quiet window starts over.
    fake.dispatch('CHANNEL_CREATE', { id: '5000000000000000009', type: 0, guild_id: guildId, permission_overwrites: [null] });
    await until(() => timers.pending.length === 1);
    expect(timers.pending[0]!.ms).toBe(2000);
    timers.fire();
    await until(() => fake.identifies === 3 && lines.filter((l) => l.msg === 'discord: client restarted').length === 2);
    clock.advance(61_000);
    fake.dispatch('GUILD_CREATE', { id: '4000000000000000004', roles: [null] });
    await until(() => timers.pending.length === 1);
    expect(timers.pending[0]!.ms).toBe(1000);
  });

  it('tells what is wrong with a dispatch', () => {
    expect(dispatchProblem({ t: 'MESSAGE_CREATE', d: valid('ok') })).toBeUndefined();
    expect(dispatchProblem({ t: 'MESSAGE_CREATE', d: { ...valid('x'), author: { id: 7 } } })).toBe('author.id is number, not string');
    expect(dispatchProblem({ t: 'MESSAGE_CREATE', d: { ...valid('x'), mentions: 'x' } })).toBe('mentions is string, not array');
    expect(dispatchProblem({ t: 'RESUMED', d: null })).toBeUndefined();
    expect(dispatchProblem({ t: 'SOMETHING_NEW', d: { anything: 1 } })).toBeUndefined();
    expect(dispatchProblem({ t: 'SOMETHING_NEW', d: 3 })).toBe('its data is number, not an object');
    expect(dispatchProblem(null)).toBe('the frame is not an object');
  });
});
