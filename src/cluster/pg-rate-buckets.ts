import type pg from 'pg';
import { SwitchboardError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { BucketTake, RateBucketRule, RateBuckets } from '../gateway/rate-buckets.ts';

/** The bucket's tokens refilled up to $4 (now), at most $2 (capacity); $3 is tokens per ms. */
const REFILL = 'least($2::float8, b.tokens + greatest(0, $4::bigint - b.at_ms) * $3::float8)';
/** Refused, and no notice within the window ($5 ms): this refusal is told. */
const NOTIFY = `(${REFILL} < 1 AND (b.noticed_ms IS NULL OR $4::bigint - b.noticed_ms >= $5::bigint))`;

/**
 * One take, one statement: a new sender's bucket starts full and gives one token; a known one is refilled
 * and gives one when a whole token is there. `ON CONFLICT DO UPDATE` locks the row, so concurrent takes of
 * one sender (from any replica) are applied one after the other, each on the other's result.
 */
export const TAKE_SQL = `
INSERT INTO sb_rate_bucket AS b (bucket_key, tokens, at_ms, noticed_ms, allowed, notified)
VALUES ($1, $2::float8 - 1, $4::bigint, NULL, true, false)
ON CONFLICT (bucket_key) DO UPDATE SET
  tokens = ${REFILL} - CASE WHEN ${REFILL} >= 1 THEN 1 ELSE 0 END,
  at_ms = greatest(b.at_ms, $4::bigint),
  allowed = ${REFILL} >= 1,
  notified = ${NOTIFY},
  noticed_ms = CASE WHEN ${NOTIFY} THEN $4::bigint ELSE b.noticed_ms END
RETURNING tokens, allowed, notified`;

/** Buckets full again by now (and past their notice window): the same as no row, so they are dropped. */
export const SWEEP_SQL = `
DELETE FROM sb_rate_bucket AS b
WHERE b.tokens + greatest(0, $3::bigint - b.at_ms) * $2::float8 >= $1::float8
  AND (b.noticed_ms IS NULL OR $3::bigint - b.noticed_ms >= $4::bigint)`;

/** Options of {@link PgRateBuckets}. */
export interface PgRateBucketsOptions {
  pool: Pick<pg.Pool, 'query'>;
  logger?: Logger;
  /** How often (on the callers' clock) full buckets are swept out; default 10 minutes. 0: never. */
  sweepEveryMs?: number;
}

/**
 * {@link RateBuckets} in `sb_rate_bucket` (migration 007): the replicas share every sender's bucket, so the
 * limit is the cluster's, not each replica's. Each take is exactly one statement on the pool (nothing when
 * the limit is off: the limiter does not call the store). Rows of idle senders are deleted by a sweep at most
 * once per `sweepEveryMs` per replica, in the background of a take.
 */
export class PgRateBuckets implements RateBuckets {
  private readonly pool: Pick<pg.Pool, 'query'>;
  private readonly logger?: Logger;
  private readonly sweepEveryMs: number;
  private lastSweep?: number;
  private sweeping?: Promise<void>;

  constructor(options: PgRateBucketsOptions) {
    this.pool = options.pool;
    this.logger = options.logger;
    this.sweepEveryMs = options.sweepEveryMs ?? 600_000;
  }

  async take(key: string, rule: RateBucketRule, now: number): Promise<BucketTake> {
    const params = [key, rule.capacity, rule.perMs, Math.round(now), rule.noticeWindowMs];
    const row = (await this.pool.query<{ tokens: number; allowed: boolean; notified: boolean }>(TAKE_SQL, params)).rows[0];
    if (!row) throw new SwitchboardError('RATE_BUCKET_NO_ROW', 'rate limit: the bucket upsert returned no row; is migration 007 applied?');
    this.maybeSweep(rule, now);
    return { allowed: row.allowed, tokens: Number(row.tokens), notify: row.notified };
  }

  /** Resolves when a sweep started by a take has finished (tests). */
  async settled(): Promise<void> {
    await this.sweeping;
  }

  private maybeSweep(rule: RateBucketRule, now: number): void {
    if (this.sweepEveryMs <= 0 || this.sweeping) return;
    if (this.lastSweep === undefined) {
      // The first take only starts the interval: a replica that restarts often does not sweep each time.
      this.lastSweep = now;
      return;
    }
    if (now - this.lastSweep < this.sweepEveryMs) return;
    this.lastSweep = now;
    this.sweeping = this.pool.query(SWEEP_SQL, [rule.capacity, rule.perMs, Math.round(now), rule.noticeWindowMs])
      .then((result) => { if (result.rowCount) this.logger?.debug({ removed: result.rowCount }, 'rate limit: idle senders\' buckets swept'); })
      .catch((err: unknown) => this.logger?.warn({ err }, 'rate limit: could not sweep idle senders\' buckets'))
      .finally(() => { this.sweeping = undefined; });
  }
}
