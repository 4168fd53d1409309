import { afterEach, expect, it } from 'vitest';
import type { Clock } from '../../src/core/clock.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase({ migrate: false });

/** One time for every replica, each with its own scheduler timers. */
class SharedTime implements Clock {
  readonly timers: ManualTimers[] = [];
  constructor(public at: number) {}
  now(): number { return this.at; }
  advance(ms: number): void {
    this.at += ms;
    for (const t of this.timers) t.advance(ms);
  }
}

describePg('cluster mode: three replicas with the same job (SPEC §17)', () => {
  const running: { gw: RunningGateway; remove: () => void }[] = [];
  afterEach(async () => {
    for (const r of running.splice(0)) { await r.gw.stop(); r.remove(); }
  });

  it('each of 100 due times runs once, whichever replica fires first', async () => {
    const time = new SharedTime(Date.UTC(2026, 11, 2, 9, 0, 30));
    const channels: TestChannel[] = [];
    for (const name of ['r1', 'r2', 'r3']) {
      const tmp = tempDir();
      const channel = new TestChannel('telegram');
      const timers = new ManualTimers();
      time.timers.push(timers);
      const gw = await startTestGateway({
        dir: tmp.dir, adapters: [channel], clock: time, schedulerTimers: timers,
        config: {
          store: db.uri, cluster: { pollMs: 50, replicaId: name }, channels: { telegram: { dmPolicy: 'open' } }, agents: { defaults: { tools: { preset: 'none' } } },
          jobs: [{ id: 'tick', schedule: 'every 1m', prompt: 'tick', deliverTo: { channel: 'telegram', peer: '42' } }],
        },
      });
      running.push({ gw, remove: tmp.remove });
      channels.push(channel);
    }
    const sent = () => channels.flatMap((c) => c.sent);
    for (let i = 1; i <= 100; i++) {
      time.advance(60_000);
      await until(() => sent().length >= i, `the answer to due time ${i}`);
    }
    // Settle: nothing more comes in after the last one.
    await until(async () => (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM sb_inbox WHERE done_at IS NULL')).rows[0]!.n === 0, 'the queue to drain');
    const queued = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM sb_inbox WHERE delivery_key LIKE '%job:tick:%'");
    expect(queued.rows[0]!.n).toBe(100);
    expect(sent()).toHaveLength(100);
    const { rows } = await db.pool.query<{ last: Date; runs: string }>("SELECT last_due_at AS last, runs FROM sb_job_state WHERE job_id = 'tick'");
    expect(rows[0]!.last.getTime()).toBe(Date.UTC(2026, 11, 2, 10, 40));
  }, 180_000);
});
