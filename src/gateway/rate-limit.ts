import type { Clock } from '../core/clock.ts';

/** `limits.perSender` (SPEC §14): a token bucket per sender; 0 turns it off. */
export interface RateLimitConfig {
  perMinute: number;
  burst: number;
}

interface Bucket {
  tokens: number;
  at: number;
  /** When this sender was last told to slow down. */
  noticedAt?: number;
}

/** What the limiter decided for one message. */
export type RateDecision =
  | { allowed: true }
  /** `notify`: the first refusal of this window, so the sender is told once. */
  | { allowed: false; retryAfterMs: number; notify: boolean };

/** Senders remembered at most; the fullest (idle) buckets are forgotten first. */
const MAX_BUCKETS = 100_000;
const NOTICE_WINDOW_MS = 60_000;

/**
 * A token bucket per sender (`<channel>:<peer>`, or the client for the HTTP API), refilled continuously at
 * `perMinute` per minute up to `burst`. Hand-written rather than a library so it runs on the injected clock.
 */
export class SenderRateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly capacity: number;
  private readonly perMs: number;
  private readonly clock: Clock;

  constructor(config: RateLimitConfig, clock: Clock) {
    // A bucket below one token never lets a message through (perMinute 0.5 with burst 0 would refuse forever).
    this.capacity = Math.max(1, config.burst > 0 ? config.burst : config.perMinute);
    this.perMs = config.perMinute / 60_000;
    this.clock = clock;
  }

  get enabled(): boolean {
    return this.perMs > 0 && this.capacity > 0;
  }

  /** Takes one token for `key`, or says how long until one is there. */
  take(key: string): RateDecision {
    if (!this.enabled) return { allowed: true };
    const now = this.clock.now();
    let bucket = this.buckets.get(key);
    if (bucket) {
      bucket.tokens = Math.min(this.capacity, bucket.tokens + (now - bucket.at) * this.perMs);
      bucket.at = now;
      this.buckets.delete(key);
    } else {
      bucket = { tokens: this.capacity, at: now };
      if (this.buckets.size >= MAX_BUCKETS) this.buckets.delete(this.buckets.keys().next().value as string);
    }
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true };
    }
    const retryAfterMs = Math.ceil((1 - bucket.tokens) / this.perMs);
    const notify = bucket.noticedAt === undefined || now - bucket.noticedAt >= NOTICE_WINDOW_MS;
    if (notify) bucket.noticedAt = now;
    return { allowed: false, retryAfterMs, notify };
  }
}
