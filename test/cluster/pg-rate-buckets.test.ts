import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PgRateBuckets } from '../../src/cluster/pg-rate-buckets.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { MemoryRateBuckets, SenderRateLimiter, type RateDecision } from '../../src/gateway/rate-limit.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();

/** A pool of one "replica", counting the statements it sends. */
function replicaPool(): { pool: pg.Pool; counted: Pick<pg.Pool, 'query'>; statements: () => number } {
  const pool = new pg.Pool({ connectionString: db.uri, max: 8 });
  pool.on('error', () => undefined);
  let n = 0;
  const counted = { query: ((...args: Parameters<pg.Pool['query']>) => { n++; return pool.query(...args); }) as pg.Pool['query'] };
  return { pool, counted, statements: () => n };
}

const allowed = (decisions: RateDecision[]) => decisions.filter((d) => d.allowed).length;

describePg('PgRateBuckets: limits.perSender shared by the replicas in one table', () => {
  let a: ReturnType<typeof replicaPool>;
  let b: ReturnType<typeof replicaPool>;
  beforeAll(() => {
    a = replicaPool();
    b = replicaPool();
  });
  afterAll(async () => {
    await a.pool.end();
    await b.pool.end();
  });

  /** Two replicas' limiters on the same clock (the replicas' clocks agree), each with its own pool. */
  function replicas(config: { perMinute: number; burst: number }, clock = new ManualClock('2026-12-01T10:00:00Z')) {
    const one = new SenderRateLimiter(config, clock, { buckets: new PgRateBuckets({ pool: a.counted }) });
    const two = new SenderRateLimiter(config, clock, { buckets: new PgRateBuckets({ pool: b.counted }) });
    return { one, two, clock };
  }

  it('two replicas together allow the burst once, not once each; refill on the injected clock; one slow-down notice between them', async () => {
    const { one, two, clock } = replicas({ perMinute: 6, burst: 3 }); // a token per 10 s
    const decisions = [await one.take('telegram:alice'), await two.take('telegram:alice'), await one.take('telegram:alice')];
    expect(decisions).toEqual([{ allowed: true }, { allowed: true }, { allowed: true }]);
    expect(await two.take('telegram:alice')).toEqual({ allowed: false, retryAfterMs: 10_000, notify: true });
    expect(await one.take('telegram:alice')).toEqual({ allowed: false, retryAfterMs: 10_000, notify: false });
    clock.advance(4_000);
    expect(await one.take('telegram:alice')).toEqual({ allowed: false, retryAfterMs: 6_000, notify: false });
    clock.advance(5_999);
    expect(await two.take('telegram:alice')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    clock.advance(1);
    expect(await two.take('telegram:alice')).toEqual({ allowed: true });
    expect(await one.take('telegram:alice')).toMatchObject({ allowed: false, retryAfterMs: 10_000 });
    // 50 s later the bucket is full (3, not 5); a minute after the notice, a refusal is told again (by either replica).
    clock.advance(50_000);
    expect(allowed([await one.take('telegram:alice'), await two.take('telegram:alice'), await one.take('telegram:alice')])).toBe(3);
    expect(await two.take('telegram:alice')).toEqual({ allowed: false, retryAfterMs: 10_000, notify: true });
    expect(await one.take('telegram:alice')).toMatchObject({ allowed: false, notify: false });
    // Other senders have their own buckets.
    expect(await one.take('telegram:bob')).toEqual({ allowed: true });
  });

  it('a race of many concurrent takes from both replicas never admits more than the tokens there are', async () => {
    const { one, two, clock } = replicas({ perMinute: 60, burst: 5 }); // a token per second
    for (let round = 0; round < 4; round++) {
      const takes = Array.from({ length: 40 }, (_, i) => (i % 2 ? one : two).take('api:racer'));
      // Round 0: the full bucket (5); then 2 s of refill each round (2).
      expect(allowed(await Promise.all(takes))).toBe(round === 0 ? 5 : 2);
      clock.advance(2_000);
    }
    // A new sender's first takes racing (the row's INSERT against the others' UPDATE) also gives exactly the burst.
    const first = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? one : two).take('api:newcomer')));
    expect(allowed(first)).toBe(5);
  });

  it('one statement per take when a limit is set, none when it is off', async () => {
    const before = a.statements() + b.statements();
    const off = replicas({ perMinute: 0, burst: 10 });
    for (let i = 0; i < 50; i++) expect(await off.one.take(`whatsapp:${i}`)).toEqual({ allowed: true });
    expect(a.statements() + b.statements()).toBe(before);
    const on = replicas({ perMinute: 30, burst: 2 });
    for (let i = 0; i < 20; i++) await (i % 2 ? on.one : on.two).take(`whatsapp:${i % 3}`);
    expect(a.statements() + b.statements() - before).toBe(20);
  });

  it('decides exactly as the in-memory buckets do over a random run of takes and pauses', async () => {
    let seed = 31;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (const config of [{ perMinute: 6, burst: 3 }, { perMinute: 0.5, burst: 0 }, { perMinute: 90, burst: 1 }]) {
      const clock = new ManualClock('2026-12-01T12:00:00Z');
      const memory = new SenderRateLimiter(config, clock, { buckets: new MemoryRateBuckets() });
      const shared = new SenderRateLimiter(config, clock, { buckets: new PgRateBuckets({ pool: a.counted }) });
      for (let i = 0; i < 120; i++) {
        const key = `fuzz:${config.perMinute}:${Math.floor(random() * 3)}`;
        expect(await shared.take(key)).toEqual(await memory.take(key));
        clock.advance(Math.floor(random() * random() * 40_000));
      }
    }
  });

  it('sweeps the rows of senders whose buckets are full again, at most once per interval, keeping recent refusals', async () => {
    const clock = new ManualClock('2026-12-02T08:00:00Z');
    const buckets = new PgRateBuckets({ pool: a.counted, sweepEveryMs: 600_000 });
    const limiter = new SenderRateLimiter({ perMinute: 600, burst: 2 }, clock, { buckets }); // full again 200 ms after empty
    const rows = async () => (await db.pool.query<{ bucket_key: string }>("SELECT bucket_key FROM sb_rate_bucket WHERE bucket_key LIKE 'sweep:%' ORDER BY 1")).rows.map((r) => r.bucket_key);
    await limiter.take('sweep:idle');
    clock.advance(599_000);
    await limiter.take('sweep:busy');
    await limiter.take('sweep:busy');
    expect(await limiter.take('sweep:busy')).toMatchObject({ allowed: false, notify: true });
    clock.advance(1_000); // busy's bucket is full again, but its notice is a second old: kept, so it is not told twice in a minute
    const before = a.statements();
    await limiter.take('sweep:other');
    await buckets.settled();
    expect(a.statements() - before).toBe(2); // the take and the sweep
    expect(await rows()).toEqual(['sweep:busy', 'sweep:other']);
    const again = a.statements();
    await limiter.take('sweep:other');
    await buckets.settled();
    expect(a.statements() - again).toBe(1); // no second sweep within the interval
  });
});
