import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PgRateBuckets } from '../../src/cluster/pg-rate-buckets.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { mountHookRoutes, withHookAuthExemption } from '../../src/http/hook-routes.ts';
import { testConfig, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { FakeJobs } from '../http/fake-jobs.ts';

const db = useTestDatabase();
const HOOKS_TOKEN = 'hooks-token-xyz';

/** Webhooks' `limits.perSender` in cluster mode: the replicas' hook routes share each caller's bucket. */
describePg('webhooks with shared rate buckets', () => {
  let pool: pg.Pool;
  const tmp = tempDir();
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: db.uri, max: 4 });
  });
  afterAll(async () => {
    await pool.end();
    tmp.remove();
  });

  /** One replica's app with the hook routes on the shared buckets. */
  function replica(clock: ManualClock) {
    const config = testConfig(tmp.dir, { limits: { perSender: { perMinute: 2, burst: 2 } } });
    const app = createHttpApp({
      authToken: 'gateway-token', maxBodyBytes: config.gateway.maxBodyBytes, logger: silentLogger(), channelRoutes: [],
      browserAuth: withHookAuthExemption(HOOKS_TOKEN),
      mounts: [mountHookRoutes({
        token: HOOKS_TOKEN, sink: () => { throw new Error('no turn here'); }, jobs: new FakeJobs(), config, clock, logger: silentLogger(),
        rateBuckets: new PgRateBuckets({ pool }),
      })],
    });
    return (from: string) => app.request('/hooks/wake', {
      method: 'POST', headers: { host: '127.0.0.1', 'content-type': 'application/json', authorization: `Bearer ${HOOKS_TOKEN}` }, body: '{}',
    }, { incoming: { socket: { remoteAddress: from } } });
  }

  it('a caller gets burst 2 across two replicas, not 2 on each; refilled on the injected clock', async () => {
    const clock = new ManualClock('2026-12-02T07:00:00Z');
    const [one, two] = [replica(clock), replica(clock)];
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await (i % 2 ? two : one)('10.0.0.9')).status);
    expect(statuses).toEqual([202, 202, 429, 429]);
    expect((await one('10.0.0.10')).status).toBe(202); // another caller
    clock.advance(30_000);
    expect((await two('10.0.0.9')).status).toBe(202);
    const refused = await one('10.0.0.9');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('30');
  });
});
