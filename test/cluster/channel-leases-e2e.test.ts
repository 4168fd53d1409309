import { afterEach, expect, it } from 'vitest';
import { createTelegramChannel } from '../../channels/telegram/index.ts';
import { PgChannelWatermarks } from '../../src/cluster/channel-watermarks.ts';
import { PgChannelLeases } from '../../src/cluster/leader-lease.ts';
import { systemClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { dm } from '../channels/telegram/updates.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase({ migrate: false });

describePg('cluster mode, whole gateways: one elected Telegram poller among the replicas', () => {
  let telegram: FakeTelegram | undefined;
  const running: { gw: RunningGateway; leases: PgChannelLeases; remove: () => void }[] = [];
  afterEach(async () => {
    for (const r of running.splice(0)) {
      await r.gw.stop();
      await r.leases.close();
      r.remove();
    }
    await telegram?.close();
    telegram = undefined;
  });

  /** A replica with the real Telegram channel in polling mode, its leases and watermarks on the shared database. */
  async function replica(id: string, fake: FakeTelegram) {
    const tmp = tempDir();
    const timers = new ManualTimers();
    const leases = new PgChannelLeases({ uri: db.uri, leaseMs: 30_000, pollMs: 100, logger: silentLogger(), timers });
    const adapter = createTelegramChannel({
      account: {
        accountId: 'default', enabled: true, dmPolicy: 'open', allowFrom: [], groupPolicy: 'allowlist', groups: [], requireMention: true,
        botToken: fake.token, apiRoot: fake.apiRoot, mode: 'polling', webhookSecret: '',
      },
      clock: systemClock, logger: silentLogger(), stateDir: tmp.dir,
      cluster: { leases, watermarks: new PgChannelWatermarks(db.pool) },
    });
    const gw = await startTestGateway({
      dir: tmp.dir, adapters: [adapter],
      config: { store: db.uri, cluster: { pollMs: 100, replicaId: id }, channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer' }, agents: { defaults: { tools: { preset: 'none' } } } },
    });
    const entry = { gw, leases, remove: tmp.remove };
    running.push(entry);
    return { gw, adapter, entry, timers };
  }

  it('every update is answered once: the holder polls, the other stands by (ready) and takes over on its next try when the holder stops', async () => {
    const fake = await startFakeTelegram({ maxPollMs: 200 });
    telegram = fake;
    const a = await replica('r1', fake);
    const b = await replica('r2', fake);
    await until(() => a.adapter.status === 'running', 'r1 to poll');
    expect(b.adapter.status).toBe('standby');
    expect((await fetch(`${b.gw.url}/readyz`)).status).toBe(200);

    const peers = [601, 602, 603];
    const from = (id: number) => ({ id, is_bot: false, first_name: `P${id}` });
    for (const id of peers) fake.pushUpdate(dm(`before ${id}`, { from: from(id) }));
    const answered = (text: string) => fake.callsOf('sendMessage').filter((c) => c.response.ok && String(c.body.text).includes(text));
    await until(() => peers.every((id) => answered(`before ${id}`).length === 1), 'the first answers');

    // The holder goes away (its leases are given up with its stop); the standby wins within pollMs and polls.
    const first = running.shift()!;
    await first.gw.stop();
    await first.leases.close();
    first.remove();
    b.timers.advance(100);
    await until(() => b.adapter.status === 'running', 'r2 to take over');
    for (const id of peers) fake.pushUpdate(dm(`after ${id}`, { from: from(id) }));
    await until(() => peers.every((id) => answered(`after ${id}`).length === 1), 'the answers after the takeover');
    for (const id of peers) expect(answered(`before ${id}`)).toHaveLength(1);
    expect(fake.conflicts).toBe(0);
  }, 30_000);
});
