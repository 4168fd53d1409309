import type { Clock } from '../core/clock.ts';
import type { Logger } from '../core/logger.ts';
import { MemoryRateBuckets, type RateBucketRule, type RateBuckets } from './rate-buckets.ts';

export type { BucketTake, RateBucketRule, RateBuckets } from './rate-buckets.ts';
export { MemoryRateBuckets } from './rate-buckets.ts';

/** `limits.perSender` (SPEC §14): a token bucket per sender; 0 turns it off. */
export interface RateLimitConfig {
  perMinute: number;
  burst: number;
}

/** What the limiter decided for one message. */
export type RateDecision =
  | { allowed: true }
  /** `notify`: the first refusal of this window, so the sender is told once. */
  | { allowed: false; retryAfterMs: number; notify: boolean };

/** Options of {@link SenderRateLimiter}. */
export interface SenderRateLimiterOptions {
  /** Where the buckets live: in this process by default; cluster mode passes the shared database's. */
  buckets?: RateBuckets;
  /** Told when the bucket store fails (the message is then let through). */
  logger?: Logger;
}

const NOTICE_WINDOW_MS = 60_000;

/**
 * A token bucket per sender (`<channel>:<peer>`, or the client for the HTTP API), refilled continuously at
 * `perMinute` per minute up to `burst`. Hand-written rather than a library so it runs on the injected clock
 * (the store is handed the clock's `now`, in cluster mode too). When the limit is off, the store is never asked.
 */
export class SenderRateLimiter {
  private readonly rule: RateBucketRule;
  private readonly clock: Clock;
  private readonly buckets: RateBuckets;
  private readonly logger?: Logger;
  private failing = false;

  constructor(config: RateLimitConfig, clock: Clock, options: SenderRateLimiterOptions = {}) {
    // A bucket below one token never lets a message through (perMinute 0.5 with burst 0 would refuse forever).
    const capacity = Math.max(1, config.burst > 0 ? config.burst : config.perMinute);
    this.rule = { capacity, perMs: config.perMinute / 60_000, noticeWindowMs: NOTICE_WINDOW_MS };
    this.clock = clock;
    this.buckets = options.buckets ?? new MemoryRateBuckets();
    this.logger = options.logger;
  }

  get enabled(): boolean {
    return this.rule.perMs > 0 && this.rule.capacity > 0;
  }

  /**
   * Takes one token for `key`, or says how long until one is there. A store that fails (the shared database
   * unreachable) lets the message through: the limit is a protection, and the message's own acceptance needs
   * the same database anyway.
   */
  async take(key: string): Promise<RateDecision> {
    if (!this.enabled) return { allowed: true };
    let taken;
    try {
      taken = await this.buckets.take(key, this.rule, this.clock.now());
    } catch (err) {
      if (!this.failing) this.logger?.warn({ err }, 'rate limit: the bucket store failed; messages are let through until it answers');
      this.failing = true;
      return { allowed: true };
    }
    this.failing = false;
    if (taken.allowed) return { allowed: true };
    const retryAfterMs = Math.max(1, Math.ceil((1 - taken.tokens) / this.rule.perMs));
    return { allowed: false, retryAfterMs, notify: taken.notify };
  }
}
