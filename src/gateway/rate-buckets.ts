/**
 * The store of `limits.perSender`'s token buckets (SPEC §14), as a port: one process keeps them in memory
 * ({@link MemoryRateBuckets}); cluster mode keeps them in the shared database (`src/cluster/pg-rate-buckets.ts`),
 * so that a sender cannot multiply the limit by the number of replicas.
 */

/** The shape of every bucket, from `limits.perSender`. */
export interface RateBucketRule {
  /** Tokens a full bucket holds (at least 1). */
  capacity: number;
  /** Tokens added per millisecond (more than 0). */
  perMs: number;
  /** A refused sender is told at most once per this many milliseconds. */
  noticeWindowMs: number;
}

/** The outcome of one take. */
export interface BucketTake {
  /** A whole token was there and was taken. */
  allowed: boolean;
  /** Tokens left in the bucket after this take (below 1 when refused). */
  tokens: number;
  /** Refused, and the first refusal of its notice window: the sender is told (once, by whichever replica). */
  notify: boolean;
}

/**
 * Where the buckets live. `take` refills `key`'s bucket up to `now` and takes one token in one atomic step:
 * two callers racing for the last token never both get it. A bucket never seen before starts full.
 */
export interface RateBuckets {
  /** `now`: epoch ms of the caller's (injected) clock. */
  take(key: string, rule: RateBucketRule, now: number): Promise<BucketTake>;
}

interface Bucket {
  tokens: number;
  at: number;
  /** When this sender was last told to slow down. */
  noticedAt?: number;
}

/** Senders remembered at most by default; the fullest (idle) buckets are forgotten first. */
export const MAX_MEMORY_BUCKETS = 100_000;

/**
 * The buckets of one process, in a `Map` kept in the order of last use: past `maxBuckets`, the bucket idle
 * longest is forgotten (it would have refilled the most, so forgetting it is the smallest gift).
 */
export class MemoryRateBuckets implements RateBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private readonly maxBuckets: number;

  constructor(options: { maxBuckets?: number } = {}) {
    this.maxBuckets = options.maxBuckets ?? MAX_MEMORY_BUCKETS;
  }

  /** Synchronous, for the in-process callers; {@link take} wraps it. */
  takeNow(key: string, rule: RateBucketRule, now: number): BucketTake {
    let bucket = this.buckets.get(key);
    if (bucket) {
      bucket.tokens = Math.min(rule.capacity, bucket.tokens + Math.max(0, now - bucket.at) * rule.perMs);
      bucket.at = Math.max(bucket.at, now);
      this.buckets.delete(key);
    } else {
      bucket = { tokens: rule.capacity, at: now };
      if (this.buckets.size >= this.maxBuckets) this.buckets.delete(this.buckets.keys().next().value as string);
    }
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true, tokens: bucket.tokens, notify: false };
    }
    const notify = bucket.noticedAt === undefined || now - bucket.noticedAt >= rule.noticeWindowMs;
    if (notify) bucket.noticedAt = now;
    return { allowed: false, tokens: bucket.tokens, notify };
  }

  take(key: string, rule: RateBucketRule, now: number): Promise<BucketTake> {
    return Promise.resolve(this.takeNow(key, rule, now));
  }
}
