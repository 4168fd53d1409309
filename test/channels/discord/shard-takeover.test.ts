import { afterEach, describe, expect, it } from 'vitest';
import { createDiscordChannel } from '../../../channels/discord/index.ts';
import { shardOf } from '../../../channels/discord/shard-leases.ts';
import type { DiscordAccountConfig } from '../../../src/config/resolved.ts';
import type { ChannelAdapter, InboundSink } from '../../../src/core/channel-adapter.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import { PgChannelWatermarks } from '../../../src/cluster/channel-watermarks.ts';
import { PgChannelLeases } from '../../../src/cluster/leader-lease.ts';
import { FakeLeases, fakeCluster, MemoryWatermarks } from '../../fakes/fake-leases.ts';
import { startFakeDiscord, type FakeDiscord } from '../../fakes/fake-discord.ts';
import { ManualTimers } from '../../helpers/manual-timers.ts';
import { describePg, useTestDatabase } from '../../helpers/postgres.ts';
import { until } from '../../helpers/wait.ts';

const ids = { guild: '4000000000000000001', channel: '5000000000000000001', dm: '3000000000000000003', bot: '1000000000000000001' };
const alice = { id: '2000000000000000002', username: 'alice', global_name: 'Alice' };
const SHARD0 = 'discord:default:shard:0';
const ACCOUNT = 'discord:default';

/** The gateway's side as the replicas share it: one message-id dedupe (sb_delivery), what each replica handed over. */
function sharedGateway() {
  const seen = new Set<string>();
  const log: { replica: string; id: string; text: string; status: 'accepted' | 'duplicate' }[] = [];
  const sinkOf = (replica: string): InboundSink => async (message) => {
    const status = seen.has(message.id) ? 'duplicate' as const : 'accepted' as const;
    seen.add(message.id);
    log.push({ replica, id: message.id, text: message.text, status });
    return { status, correlationId: 'c', done: Promise.resolve(undefined) };
  };
  return { sinkOf, log, accepted: (replica: string) => log.filter((l) => l.replica === replica && l.status === 'accepted').map((l) => l.text) };
}

describe('Discord in cluster mode: shards held by one replica, taken over, the gap back-filled over REST', () => {
  let fake: FakeDiscord | undefined;
  const adapters: ChannelAdapter[] = [];
  afterEach(async () => {
    await Promise.all(adapters.splice(0).map((a) => a.stop()));
    await fake?.close();
    fake = undefined;
  });

  const account = (f: FakeDiscord, shardCount = 1): DiscordAccountConfig => ({
    accountId: 'default', enabled: true, token: f.token, apiBase: f.api, dmPolicy: 'open', allowFrom: [],
    groupPolicy: 'open', groups: [], requireMention: false, shardCount,
  });

  it('one replica holds the shard; after its death the other connects it and back-fills from the watermark, duplicates dropped', async () => {
    fake = await startFakeDiscord({ bot: { id: ids.bot, username: 'switchboard', bot: true }, guilds: [{ id: ids.guild, channels: [{ id: ids.channel }] }] });
    const leases = new FakeLeases();
    const marks = new MemoryWatermarks();
    const gateway = sharedGateway();
    const replica = (name: string) => {
      const a = createDiscordChannel({ account: account(fake!), clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', cluster: fakeCluster(leases, name, marks) });
      adapters.push(a);
      return a;
    };
    const a = replica('A');
    const b = replica('B');
    await a.start(gateway.sinkOf('A'));
    await b.start(gateway.sinkOf('B'));
    expect([a.status, b.status]).toEqual(['running', 'standby']);
    expect(leases.holder(SHARD0)).toBe('A');
    expect(fake.connections).toBe(1);
    expect(fake.identifiedShards).toEqual([[0, 1]]);

    const m1 = fake.message({ channel_id: ids.channel, guild_id: ids.guild, content: 'one', author: alice });
    const m2 = fake.message({ channel_id: ids.channel, guild_id: ids.guild, content: 'two', author: alice });
    const d1 = fake.message({ channel_id: ids.dm, content: 'dm one', author: alice });
    await until(() => gateway.accepted('A').length === 3, 'A to take three messages');
    await until(async () => (await marks.list(ACCOUNT, 0)).length === 2, 'the watermarks');
    expect((await marks.list(ACCOUNT, 0)).map((m) => `${m.chatId}:${m.lastId}:${m.guildId ?? ''}`).sort())
      .toEqual([`${ids.channel}:${String(m2.id)}:${ids.guild}`, `${ids.dm}:${String(d1.id)}:`].sort());
    // A died before its last mark of the channel was written: the shared mark lags at m1.
    marks.set(ACCOUNT, { chatId: ids.channel, guildId: ids.guild, lastId: String(m1.id), at: Date.now() });

    leases.end(SHARD0); // A's lease connection ends; B is next in line
    expect(a.status).toBe('standby');
    // Posted while nobody holds the shard: only in Discord's history.
    fake.postOffline({ channel_id: ids.channel, guild_id: ids.guild, content: 'three (gap)', author: alice });
    fake.postOffline({ channel_id: ids.channel, guild_id: ids.guild, content: 'four (gap)', author: alice });
    fake.postOffline({ channel_id: ids.dm, content: 'dm two (gap)', author: alice });

    await until(() => b.status === 'running', 'B to connect the shard');
    await until(() => gateway.accepted('B').length === 3, 'B to back-fill the gap');
    expect(gateway.accepted('B')).toEqual(expect.arrayContaining(['three (gap)', 'four (gap)', 'dm two (gap)']));
    const channelOrder = gateway.accepted('B').filter((t) => t.includes('(gap)') && !t.startsWith('dm'));
    expect(channelOrder).toEqual(['three (gap)', 'four (gap)']);
    // m2 came back (the mark lagged) and was dropped by the dedupe; nothing older than the mark was fetched.
    expect(gateway.log.filter((l) => l.status === 'duplicate').map((l) => l.text)).toEqual(['two']);
    expect(gateway.log.filter((l) => l.text === 'one')).toHaveLength(1);
    expect(fake.calls.some((c) => c.method === 'GET' && c.path === `/api/v10/channels/${ids.channel}/messages`)).toBe(true);

    // Live messages now reach B; the dead replica's old connection is gone.
    await until(() => fake!.connections === 1, 'one gateway connection');
    fake.message({ channel_id: ids.channel, guild_id: ids.guild, content: 'five (live)', author: alice });
    await until(() => gateway.accepted('B').includes('five (live)'), 'B to take a live message');
    expect(gateway.accepted('A')).toEqual(['one', 'two', 'dm one']);
    expect((await marks.list(ACCOUNT, 0)).find((m) => m.chatId === ids.channel)?.lastId).not.toBe(String(m1.id));
  });

  it('a replica that does not hold the shard still sends replies and typing over REST', async () => {
    fake = await startFakeDiscord({ bot: { id: ids.bot, username: 'switchboard', bot: true }, guilds: [{ id: ids.guild, channels: [{ id: ids.channel }] }] });
    const leases = new FakeLeases();
    const marks = new MemoryWatermarks();
    const gateway = sharedGateway();
    const holder = createDiscordChannel({ account: account(fake), clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', cluster: fakeCluster(leases, 'A', marks) });
    const standby = createDiscordChannel({ account: account(fake), clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', cluster: fakeCluster(leases, 'B', marks) });
    adapters.push(holder, standby);
    await holder.start(gateway.sinkOf('A'));
    await standby.start(gateway.sinkOf('B'));
    expect(standby.status).toBe('standby');
    await standby.typing!({ channel: 'discord', accountId: 'default', chatId: ids.channel, chatType: 'channel' });
    await standby.send({ channel: 'discord', accountId: 'default', chatId: ids.channel, chatType: 'channel', replyToId: '9000000000000000009' }, { text: 'answered by the standby' });
    const post = fake.posts(ids.channel).at(-1);
    expect(post?.body).toMatchObject({ content: 'answered by the standby', message_reference: { message_id: '9000000000000000009', fail_if_not_exists: false }, allowed_mentions: { parse: [], replied_user: true } });
    expect(fake.calls.some((c) => c.method === 'POST' && c.path === `/api/v10/channels/${ids.channel}/typing`)).toBe(true);
  });

  it('holds only the shards it won: with two shards and two replicas, each connects one', async () => {
    fake = await startFakeDiscord({ bot: { id: ids.bot, username: 'switchboard', bot: true } });
    const leases = new FakeLeases();
    const marks = new MemoryWatermarks();
    const gateway = sharedGateway();
    // A campaigns first and wins both; B stands by. A's shard 1 ends: B takes just that one.
    const a = createDiscordChannel({ account: account(fake, 2), clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', cluster: fakeCluster(leases, 'A', marks) });
    const b = createDiscordChannel({ account: account(fake, 2), clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', cluster: fakeCluster(leases, 'B', marks) });
    adapters.push(a, b);
    await a.start(gateway.sinkOf('A'));
    await b.start(gateway.sinkOf('B'));
    expect([leases.holder('discord:default:shard:0'), leases.holder('discord:default:shard:1')]).toEqual(['A', 'A']);
    leases.end('discord:default:shard:1');
    await until(() => b.status === 'running', 'B to connect shard 1');
    expect(a.status).toBe('running');
    expect(leases.holder('discord:default:shard:1')).toBe('B');
    expect(fake.identifiedShards).toEqual(expect.arrayContaining([[0, 2], [1, 2]]));
    await until(() => fake!.connections === 2, 'two connections, one per shard');
  });

  it('a shard client that discord.js failed on is given up (lease resigned) and connected afresh, with the gap back-filled', async () => {
    fake = await startFakeDiscord({ bot: { id: ids.bot, username: 'switchboard', bot: true }, guilds: [{ id: ids.guild, channels: [{ id: ids.channel }] }] });
    const leases = new FakeLeases();
    const marks = new MemoryWatermarks();
    const gateway = sharedGateway();
    const a = createDiscordChannel({ account: account(fake), clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', cluster: fakeCluster(leases, 'A', marks) });
    adapters.push(a);
    await a.start(gateway.sinkOf('A'));
    fake.message({ channel_id: ids.channel, guild_id: ids.guild, content: 'before', author: alice });
    await until(() => gateway.accepted('A').length === 1 && marks.marks.size === 1, 'the first message and its mark');
    fake.dispatch('GUILD_CREATE', { id: '4000000000000000003', channels: [null] }); // well-formed enough, then discord.js throws
    // Posted before the new connection is up, so only its back-fill can bring it.
    fake.postOffline({ channel_id: ids.channel, guild_id: ids.guild, content: 'while reconnecting', author: alice });
    await until(() => fake!.identifies === 2, 'a fresh connection of the shard');
    await until(() => gateway.accepted('A').includes('while reconnecting'), 'the back-fill of the new connection');
    expect(leases.holder(SHARD0)).toBe('A');
    await until(() => a.status === 'running', 'running again');
  });

  it('maps guilds to shards as Discord does, and DMs to shard 0', () => {
    expect(shardOf(undefined, 4)).toBe(0);
    expect(shardOf('41771983423143937', 1)).toBe(0);
    // (41771983423143937 >> 22) = 9959301703 → % 4 = 3
    expect(shardOf('41771983423143937', 4)).toBe(Number((41771983423143937n >> 22n) % 4n));
  });
});

const db = useTestDatabase();

describePg('Discord shard takeover on PostgreSQL leases and watermarks', () => {
  let fake: FakeDiscord | undefined;
  const adapters: ChannelAdapter[] = [];
  const clusters: PgChannelLeases[] = [];
  afterEach(async () => {
    await Promise.all(adapters.splice(0).map((a) => a.stop()));
    await Promise.all(clusters.splice(0).map((c) => c.close()));
    await fake?.close();
    fake = undefined;
  });

  it('the standby wins the shard when the holder\'s lease connection ends and back-fills what it missed', async () => {
    const f = await startFakeDiscord({ bot: { id: ids.bot, username: 'switchboard', bot: true }, guilds: [{ id: ids.guild, channels: [{ id: ids.channel }] }] });
    fake = f;
    const gateway = sharedGateway();
    const replica = () => {
      const timers = new ManualTimers();
      const leases = new PgChannelLeases({ uri: db.uri, leaseMs: 30_000, pollMs: 500, logger: silentLogger(), timers });
      clusters.push(leases);
      const a = createDiscordChannel({
        account: { accountId: 'default', enabled: true, token: f.token, apiBase: f.api, dmPolicy: 'open', allowFrom: [], groupPolicy: 'open', groups: [], requireMention: false, shardCount: 1 },
        clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', cluster: { leases, watermarks: new PgChannelWatermarks(db.pool) },
      });
      adapters.push(a);
      return { adapter: a, timers };
    };
    const one = replica();
    const two = replica();
    await one.adapter.start(gateway.sinkOf('one'));
    await two.adapter.start(gateway.sinkOf('two'));
    expect([one.adapter.status, two.adapter.status]).toEqual(['running', 'standby']);
    const m1 = f.message({ channel_id: ids.channel, guild_id: ids.guild, content: 'one', author: alice });
    await until(async () => (await db.pool.query('SELECT last_id::text AS id FROM sb_channel_watermark')).rows[0]?.id === String(m1.id), 'the watermark in PostgreSQL');

    const { rows } = await db.pool.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock%' ORDER BY backend_start LIMIT 1",
    );
    await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    await until(() => one.adapter.status === 'standby', 'one to drop the shard');
    f.postOffline({ channel_id: ids.channel, guild_id: ids.guild, content: 'two (gap)', author: alice });
    two.timers.advance(500);
    await until(() => gateway.accepted('two').includes('two (gap)'), 'two to back-fill');
    expect(two.adapter.status).toBe('running');
    expect(gateway.accepted('one')).toEqual(['one']);
    expect(gateway.log.filter((l) => l.text === 'one')).toHaveLength(1);
  });
});
