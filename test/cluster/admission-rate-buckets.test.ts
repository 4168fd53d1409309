import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PgRateBuckets } from '../../src/cluster/pg-rate-buckets.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { Admission, type AdmissionDeps } from '../../src/gateway/admission.ts';
import type { GatewayOptions, GatewayStats } from '../../src/gateway/gateway-options.ts';
import { testConfig, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();

/**
 * The gateway's admission with `rateBuckets` in its options (as main.ts passes them in cluster mode): two
 * replicas' admissions on one database share each sender's bucket, and a limit costs one statement per message.
 */
describePg('admission with shared rate buckets: a sender cannot multiply limits.perSender by the replicas', () => {
  let pool: pg.Pool;
  let statements = 0;
  const tmp = tempDir();
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: db.uri, max: 4 });
  });
  afterAll(async () => {
    await pool.end();
    tmp.remove();
  });
  const counted = { query: ((...args: Parameters<pg.Pool['query']>) => { statements++; return pool.query(...args); }) as pg.Pool['query'] };

  /** One replica's admission: its own stats and notices, the shared buckets, nothing run (the lane is stubbed). */
  function replica(perSender: { perMinute: number; burst: number }, clock: ManualClock) {
    const config = testConfig(tmp.dir, { channels: { telegram: { enabled: true, botToken: 't', dmPolicy: 'open' } }, limits: { perSender } });
    const notices: string[] = [];
    const stats: GatewayStats = { accepted: 0, duplicates: 0, blocked: 0, skipped: 0, failed: 0, rateLimited: 0 };
    const options = {
      config, clock, logger: silentLogger(), rateBuckets: new PgRateBuckets({ pool: counted }),
      runtime: { isImmediate: (text: string) => text.startsWith('/status'), events: { emit: () => undefined } },
    } as unknown as GatewayOptions;
    const deps = {
      options, stats, groupContext: { add: () => undefined },
      outbound: { deliver: async (_m: InboundMessage, reply: { text: string }) => { notices.push(reply.text); } },
      sessionKeyOf: (m: InboundMessage) => `agent:main:telegram:direct:${m.peerId}`,
      runImmediate: async () => undefined, enqueue: async () => undefined,
    } as unknown as AdmissionDeps;
    return { admission: new Admission(deps), stats, notices };
  }

  let n = 0;
  const message = (peerId: string, text = 'hi'): InboundMessage => ({
    id: String(++n), channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: peerId, peerId,
    sender: { id: peerId }, text, attachments: [], mentionsBot: false, receivedAt: 0,
  });
  const route = (r: ReturnType<typeof replica>, m: InboundMessage) => r.admission.route(m, {}, `c${m.id}`, silentLogger(), false, false);

  it('burst 2 across two replicas: 2 accepted in all, one slow-down notice, /status never limited; one statement per message', async () => {
    const clock = new ManualClock('2026-12-02T09:00:00Z');
    const one = replica({ perMinute: 2, burst: 2 }, clock);
    const two = replica({ perMinute: 2, burst: 2 }, clock);
    const before = statements;
    const outcomes = [];
    for (let i = 0; i < 6; i++) outcomes.push((await route(i % 2 ? two : one, message('555'))).status);
    expect(outcomes).toEqual(['accepted', 'accepted', 'rate_limited', 'rate_limited', 'rate_limited', 'rate_limited']);
    expect(statements - before).toBe(6);
    expect([...one.notices, ...two.notices]).toHaveLength(1);
    expect((await route(two, message('555', '/status'))).status).toBe('accepted');
    expect(statements - before).toBe(6);
    clock.advance(30_000); // a token per 30 s
    expect((await route(two, message('555'))).status).toBe('accepted');
    expect((await route(one, message('555'))).status).toBe('rate_limited');
    expect(one.stats.accepted + two.stats.accepted).toBe(4); // 3 messages and /status
  });

  it('no statement at all when limits.perSender is off', async () => {
    const clock = new ManualClock('2026-12-02T09:00:00Z');
    const one = replica({ perMinute: 0, burst: 0 }, clock);
    const before = statements;
    for (let i = 0; i < 10; i++) expect((await route(one, message('777'))).status).toBe('accepted');
    expect(statements).toBe(before);
  });
});
