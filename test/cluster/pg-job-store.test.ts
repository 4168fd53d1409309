import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PgJobStore } from '../../src/cluster/pg-job-store.ts';
import { T0, job, jobStoreContract } from '../scheduler/job-store-contract.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();
const MINUTE = 60_000;

describePg('PgJobStore', () => {
  jobStoreContract(async () => {
    await db.pool.query('TRUNCATE sb_job, sb_job_state');
    return new PgJobStore({ pool: db.pool });
  });

  describePg('three replicas', () => {
    const pools: pg.Pool[] = [];
    let stores: PgJobStore[] = [];
    beforeAll(async () => {
      for (let i = 0; i < 3; i++) {
        const pool = new pg.Pool({ connectionString: db.uri, max: 4 });
        pool.on('error', () => undefined);
        // Connected before the races, so that the claims of the three really overlap.
        await Promise.all(Array.from({ length: 4 }, async () => (await pool.connect()).release()));
        pools.push(pool);
      }
      stores = pools.map((pool) => new PgJobStore({ pool }));
    });
    afterAll(async () => {
      await Promise.all(pools.map((pool) => pool.end()));
    });

    it('claim each of 100 due times exactly once when all three race for each (4 jobs at a time)', { timeout: 60_000 }, async () => {
      const jobs = ['race-a', 'race-b', 'race-c', 'race-d'];
      const wins = new Map<string, number>();
      const started = performance.now();
      for (let i = 1; i <= 100; i++) {
        const due = T0 + i * MINUTE;
        // Each store claims each job's due time twice: 3 × 2 × 4 concurrent claims per due time.
        const claims = jobs.flatMap((id) => stores.flatMap((store) => [store.claim(id, due), store.claim(id, due)].map(async (p) => ({ id, won: await p }))));
        for (const { id, won } of await Promise.all(claims)) if (won) wins.set(`${id}@${due}`, (wins.get(`${id}@${due}`) ?? 0) + 1);
      }
      const ms = performance.now() - started;
      console.log(`PgJobStore: 100 due times × 4 jobs, 24 racing claims each (3 pools): ${Math.round(ms)} ms, ${(ms / 100).toFixed(1)} ms per round`);
      expect(wins.size).toBe(400);
      expect([...wins.values()].every((n) => n === 1)).toBe(true);
      for (const id of jobs) expect((await stores[0]!.stateOf(id, T0)).lastDueAt).toBe(T0 + 100 * MINUTE);
    });

    it('never claims a due time twice when the replicas run through the same 100 due times each at its own pace', { timeout: 60_000 }, async () => {
      const claimed: number[] = [];
      await Promise.all(stores.map(async (store) => {
        for (let i = 1; i <= 100; i++) {
          const due = T0 + 1000 * MINUTE + i * MINUTE;
          if (await store.claim('paced', due)) claimed.push(due);
        }
      }));
      // A replica that falls behind loses the due times another has passed (they are not run late, or twice).
      expect(new Set(claimed).size).toBe(claimed.length);
      expect(claimed).toContain(T0 + 1100 * MINUTE);
      expect((await stores[1]!.stateOf('paced', T0)).lastDueAt).toBe(T0 + 1100 * MINUTE);
      console.log(`PgJobStore: 3 free-running replicas claimed ${claimed.length} of 100 due times, none twice`);
    });

    it('makes a state once when the three ask for it at the same time: all see the since of the one that made it', async () => {
      const ids = Array.from({ length: 20 }, (_, i) => `first-seen-${i}`);
      const seen = await Promise.all(ids.map(async (id) => Promise.all(stores.map((store, r) => store.stateOf(id, T0 + r)))));
      const stored = new Map((await stores[0]!.listStates()).map((s) => [s.jobId, s]));
      for (const [i, states] of seen.entries()) {
        const made = stored.get(ids[i]!);
        expect(made?.since).toBeGreaterThanOrEqual(T0);
        expect(states).toEqual([made, made, made]);
      }
    });

    it('shows every replica the jobs and states another wrote', async () => {
      const shared = job('shared', { createdAt: T0 + 5 * MINUTE });
      await stores[0]!.putJob(shared);
      await stores[1]!.stateOf('shared', T0);
      await stores[2]!.setPaused('shared', true);
      expect(await stores[2]!.listJobs()).toContainEqual(shared);
      expect(await stores[0]!.stateOf('shared', T0 + MINUTE)).toEqual({ jobId: 'shared', since: T0, runs: 0, paused: true });
      expect(await stores[1]!.removeJob('shared')).toBe(true);
      expect((await stores[0]!.listStates()).map((s) => s.jobId)).not.toContain('shared');
    });
  });

  it('stores a prompt and an error with NUL characters and lone surrogates (which jsonb and text refuse) as U+FFFD', async () => {
    const store = new PgJobStore({ pool: db.pool });
    const odd = job('odd', { prompt: 'a\u0000b\ud800c' });
    await store.putJob(odd);
    expect((await store.listJobs()).find((j) => j.id === 'odd')?.prompt).toBe('a\ufffdb\ufffdc');
    await store.recordRun('odd', { outcome: 'failed', at: T0, error: 'bad\u0000byte' });
    expect((await store.stateOf('odd', T0)).lastError).toBe('bad\ufffdbyte');
  });
});
