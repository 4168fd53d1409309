import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { PgChannelWatermarks } from '../../src/cluster/channel-watermarks.ts';
import { LeaderLease, PgChannelLeases } from '../../src/cluster/leader-lease.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase();

describePg('LeaderLease: one holder per name on PostgreSQL, taken over when the holder dies', () => {
  const leases: LeaderLease[] = [];
  afterEach(async () => {
    await Promise.all(leases.splice(0).map((l) => l.stop()));
  });

  /** A lease with its events recorded and its timers in the test's hands. */
  function lease(name: string, timers = new ManualTimers()) {
    const events: string[] = [];
    const l = new LeaderLease({
      uri: db.uri, name, leaseMs: 30_000, pollMs: 500, logger: silentLogger(), timers,
      handlers: { won: () => events.push('won'), lost: () => events.push('lost') },
    });
    leases.push(l);
    return { lease: l, events, timers };
  }

  async function terminate(pid: number | undefined): Promise<void> {
    expect(pid).toBeTypeOf('number');
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
  }

  it('gives a name to one replica; the other wins it when the holder\'s connection ends, and the holder is told at once', async () => {
    const a = lease('telegram:default:poller');
    const b = lease('telegram:default:poller');
    await a.lease.start();
    await b.lease.start();
    expect([a.lease.held, b.lease.held]).toEqual([true, false]);
    expect(a.events).toEqual(['won']);
    expect(b.timers.delays()).toEqual([500, 10_000]); // b tries again after pollMs; its connection heart-beats

    b.timers.advance(500);
    await until(() => b.timers.delays().length === 2, 'b\'s second try');
    expect(b.timers.delays()).toEqual([500, 9500]);
    expect(b.lease.held).toBe(false);

    // The holder dies (PostgreSQL ends its session, as idle_session_timeout does to a frozen process).
    await terminate(a.lease.backendPid);
    await until(() => a.events.length === 2, 'the holder to notice');
    expect(a.events).toEqual(['won', 'lost']);
    expect(a.lease.held).toBe(false);
    b.timers.advance(500);
    await until(() => b.lease.held, 'b to win');
    expect(b.events).toEqual(['won']);

    // a campaigns on with a fresh connection and stays standby while b holds it.
    expect(a.timers.delays()).toEqual([500]);
    a.timers.advance(500);
    await until(() => a.timers.delays().length === 2, 'a to try again on a new connection');
    expect(a.lease.held).toBe(false);
    expect(a.events).toEqual(['won', 'lost']);
  });

  it('sets idle_session_timeout to the lease on its connection and heart-beats every lease/3', async () => {
    const a = lease('discord:default:shard:0');
    await a.lease.start();
    const row = (await db.pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1", [a.lease.backendPid],
    )).rows[0];
    expect(row?.n).toBe('1');
    expect(a.timers.delays()).toEqual([10_000]); // the heartbeat: 30 s / 3
    const before = (await db.pool.query<{ at: Date }>('SELECT state_change AS at FROM pg_stat_activity WHERE pid = $1', [a.lease.backendPid])).rows[0]!.at;
    a.timers.advance(10_000);
    await until(async () => {
      const now = (await db.pool.query<{ at: Date }>('SELECT state_change AS at FROM pg_stat_activity WHERE pid = $1', [a.lease.backendPid])).rows[0]!.at;
      return now.getTime() > before.getTime();
    }, 'the heartbeat query');
    await until(() => a.timers.delays().includes(10_000), 'the next heartbeat');
    // The setting on the lease's own connection (read through its private client).
    const client = (a.lease as unknown as { client: pg.Client }).client;
    expect((await client.query<{ idle_session_timeout: string }>('SHOW idle_session_timeout')).rows[0]?.idle_session_timeout).toBe('30s');
  });

  it('resign hands the name over; stop releases it without a lost event', async () => {
    const a = lease('discord:default:shard:1');
    const b = lease('discord:default:shard:1');
    await a.lease.start();
    await b.lease.start();
    await a.lease.resign();
    expect(a.events).toEqual(['won', 'lost']);
    b.timers.advance(500);
    await until(() => b.lease.held, 'b to win after the resignation');
    await b.lease.stop();
    expect(b.events).toEqual(['won']);
    a.timers.advance(500);
    await until(() => a.lease.held, 'a to win after b stopped');
  });

  it('PgChannelLeases campaigns through the ChannelLeases port and stops every campaign on close', async () => {
    const timers = new ManualTimers();
    const one = new PgChannelLeases({ uri: db.uri, leaseMs: 30_000, pollMs: 500, logger: silentLogger(), timers });
    const two = new PgChannelLeases({ uri: db.uri, leaseMs: 30_000, pollMs: 500, logger: silentLogger(), timers });
    const seen: string[] = [];
    const first = await one.campaign('x', { won: () => seen.push('one won'), lost: () => seen.push('one lost') });
    const second = await two.campaign('x', { won: () => seen.push('two won'), lost: () => seen.push('two lost') });
    expect([first.held, second.held]).toEqual([true, false]);
    await one.close();
    timers.advance(500);
    await until(() => second.held, 'the second to win');
    expect(seen).toEqual(['one won', 'two won']);
    await two.close();
  });
});

describePg('PgChannelWatermarks: the last accepted message per chat, shared and only moved forward', () => {
  it('keeps the highest id per chat across writers, batches, and lists the chats active since a time', async () => {
    const a = new PgChannelWatermarks(db.pool);
    const b = new PgChannelWatermarks(db.pool);
    const t0 = Date.UTC(2026, 11, 1, 10);
    await Promise.all([
      a.advance('discord:default', { chatId: '500', guildId: '400', lastId: '1300000000000000005', at: t0 }),
      a.advance('discord:default', { chatId: '500', guildId: '400', lastId: '1300000000000000007', at: t0 + 1 }),
      a.advance('discord:default', { chatId: '501', lastId: '18446744073709551000', at: t0 - 90_000_000 }),
    ]);
    await b.advance('discord:default', { chatId: '500', guildId: '400', lastId: '1300000000000000006', at: t0 + 2 });
    await b.advance('discord:other', { chatId: '500', lastId: '1', at: t0 });
    expect(await a.list('discord:default', t0 - 86_400_000)).toEqual([{ chatId: '500', guildId: '400', lastId: '1300000000000000007', at: t0 + 2 }]);
    expect(await a.list('discord:default', 0)).toEqual([
      { chatId: '500', guildId: '400', lastId: '1300000000000000007', at: t0 + 2 },
      { chatId: '501', lastId: '18446744073709551000', at: t0 - 90_000_000 },
    ]);
    expect((await a.list('discord:other', 0)).map((m) => m.lastId)).toEqual(['1']);
  });

  it('keeps the marks of a failed write for the next one', async () => {
    let fail = true;
    const pool = { query: (...args: Parameters<pg.Pool['query']>) => (fail ? Promise.reject(new Error('connection lost')) : db.pool.query(...args)) } as unknown as pg.Pool;
    const marks = new PgChannelWatermarks(pool);
    await expect(marks.advance('discord:retry', { chatId: '9', lastId: '42', at: Date.UTC(2026, 11, 1) })).rejects.toThrow('connection lost');
    fail = false;
    await marks.advance('discord:retry', { chatId: '8', lastId: '7', at: Date.UTC(2026, 11, 1) });
    expect((await marks.list('discord:retry', 0)).map((m) => `${m.chatId}:${m.lastId}`)).toEqual(['8:7', '9:42']);
  });
});
