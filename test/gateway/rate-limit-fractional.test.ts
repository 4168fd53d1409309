import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { SenderRateLimiter } from '../../src/gateway/rate-limit.ts';

describe('SenderRateLimiter with a fractional perMinute', () => {
  it('perMinute 0.5 with burst 0 takes one message, then one every two minutes (never refuses forever)', async () => {
    const clock = new ManualClock();
    const limiter = new SenderRateLimiter({ perMinute: 0.5, burst: 0 }, clock);
    expect(limiter.enabled).toBe(true);
    expect(await limiter.take('alice')).toEqual({ allowed: true });
    expect(await limiter.take('alice')).toEqual({ allowed: false, retryAfterMs: 120_000, notify: true });
    clock.advance(119_999);
    expect(await limiter.take('alice')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    clock.advance(1);
    expect(await limiter.take('alice')).toEqual({ allowed: true });
    expect(await limiter.take('alice')).toMatchObject({ allowed: false });
    // Another sender has a bucket of its own.
    expect(await limiter.take('bob')).toEqual({ allowed: true });
  });

  it('a long idle period refills a fractional bucket to one message, not more', async () => {
    const clock = new ManualClock();
    const limiter = new SenderRateLimiter({ perMinute: 0.25, burst: 0 }, clock);
    expect(await limiter.take('a')).toEqual({ allowed: true });
    clock.advance(24 * 3_600_000);
    expect(await limiter.take('a')).toEqual({ allowed: true });
    expect(await limiter.take('a')).toEqual({ allowed: false, retryAfterMs: 240_000, notify: true });
  });
});
