import { afterEach, expect, it } from 'vitest';
import { GatewayMetrics } from '../../src/accounting/metrics.ts';
import { PgChannelLeases } from '../../src/cluster/leader-lease.ts';
import type { ChannelLease } from '../../src/core/channel-leases.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase({ migrate: false });

const NAMES = ['telegram:default:poller', 'discord:default:shard:0', 'discord:default:shard:1'];

describePg('PgChannelLeases: all of a replica\'s channel leases on one connection, their losses counted', () => {
  const opened: PgChannelLeases[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()));
  });

  /** A replica's leases campaigning for every name, with its events recorded and its timers in the test's hands. */
  async function replica(id: string, names = NAMES) {
    const timers = new ManualTimers();
    const leases = new PgChannelLeases({ uri: db.uri, leaseMs: 30_000, pollMs: 500, logger: silentLogger(), timers });
    opened.push(leases);
    const events: string[] = [];
    const campaigns: ChannelLease[] = [];
    for (const name of names) campaigns.push(await leases.campaign(name, { won: () => events.push(`${id} won ${name}`), lost: () => events.push(`${id} lost ${name}`) }));
    return { leases, timers, events, campaigns, held: () => campaigns.filter((c) => c.held).map((c) => c.name) };
  }

  /** Lease connections open on the test database, by backend pid. */
  async function leaseConnections(): Promise<number[]> {
    const rows = (await db.pool.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'switchboard-leases' ORDER BY pid",
    )).rows;
    return rows.map((r) => r.pid);
  }

  it('three leases, one connection and one heartbeat; a second replica adds one connection and stands by', async () => {
    const one = await replica('one');
    expect(one.held()).toEqual(NAMES);
    expect(await leaseConnections()).toEqual([one.leases.backendPid]);
    expect(one.timers.delays()).toEqual([10_000]); // one heartbeat (30 s / 3), no retries: every lease is held
    const two = await replica('two');
    expect(two.held()).toEqual([]);
    expect((await leaseConnections()).sort()).toEqual([one.leases.backendPid, two.leases.backendPid].sort());
    expect(two.timers.delays()).toEqual([500, 500, 500, 10_000]); // each campaign retries after pollMs; one heartbeat
  });

  it('a cut connection loses every lease on it: each is told, counted in /metrics, and taken again on one new connection', async () => {
    const one = await replica('one');
    const metrics = new GatewayMetrics({
      activeSessions: () => 0, evictions: () => 0, queueDepth: () => 0, runningTurns: () => 0, messages: () => ({}),
      cluster: () => ({ takeovers: 0, leaseLosses: 0, reruns: 0, duplicateWindows: 0, channelLeaseLosses: one.leases.losses }),
    });
    const scrape = async () => /^switchboard_cluster_channel_lease_losses_total (\d+)$/m.exec(await metrics.registry.metrics())?.[1];
    expect(await scrape()).toBe('0');
    const first = one.leases.backendPid;
    await db.pool.query('SELECT pg_terminate_backend($1)', [first]);
    await until(() => one.held().length === 0 && one.events.length === 6, 'every lease to be lost');
    expect(one.events.slice(3).sort()).toEqual(NAMES.map((n) => `one lost ${n}`).sort());
    expect(one.leases.losses).toBe(3);
    expect(await scrape()).toBe('3');
    expect(one.timers.delays()).toEqual([500, 500, 500]); // the heartbeat went with the connection; each lease retries
    one.timers.advance(500);
    await until(() => one.held().length === 3, 'the leases to be taken again');
    const second = one.leases.backendPid;
    expect(second).not.toBe(first);
    await until(async () => (await leaseConnections()).join() === String(second), 'one lease connection left');
    // A resignation and a stop are not losses.
    await one.campaigns[0]!.resign();
    await one.campaigns[1]!.stop();
    expect(one.leases.losses).toBe(3);
  });

  it('when the holder\'s connection is cut, the standby replica takes every lease on its next try', async () => {
    const one = await replica('one');
    const two = await replica('two');
    await db.pool.query('SELECT pg_terminate_backend($1)', [one.leases.backendPid]);
    await until(() => one.held().length === 0, 'the holder to notice');
    two.timers.advance(500);
    await until(() => two.held().length === 3, 'the standby to win every lease');
    expect(one.leases.losses).toBe(3);
    expect(two.leases.losses).toBe(0);
    one.timers.advance(500);
    await until(() => one.timers.delays().filter((d) => d === 500).length === 3, 'the old holder to try again');
    expect(one.held()).toEqual([]);
    expect((await leaseConnections()).length).toBe(2);
  });

  it('two campaigns for one name on one replica: one holds it (advisory locks are re-entrant per connection)', async () => {
    const one = await replica('one', ['x', 'x']);
    expect(one.campaigns.map((c) => c.held)).toEqual([true, false]);
    one.timers.advance(500);
    await until(() => one.timers.delays().includes(500), 'the second campaign\'s next try');
    expect(one.campaigns.map((c) => c.held)).toEqual([true, false]);
    await one.campaigns[0]!.resign();
    one.timers.advance(500);
    await until(() => one.campaigns[1]!.held, 'the second campaign to win after the first resigned');
    expect(one.campaigns[0]!.held).toBe(false);
  });

  it('the connection ends with the last campaign, and a new campaign opens it again', async () => {
    const one = await replica('one', ['only']);
    expect((await leaseConnections()).length).toBe(1);
    await one.campaigns[0]!.stop();
    await until(async () => (await leaseConnections()).length === 0, 'the connection to end');
    const again = await one.leases.campaign('only', { won: () => undefined, lost: () => undefined });
    expect(again.held).toBe(true);
    expect((await leaseConnections()).length).toBe(1);
  });
});
