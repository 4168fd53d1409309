import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { SenderRateLimiter } from '../../src/gateway/rate-limit.ts';

describe('SenderRateLimiter', () => {
  it('is off when perMinute is 0, whatever the burst', async () => {
    const limiter = new SenderRateLimiter({ perMinute: 0, burst: 5 }, new ManualClock());
    expect(limiter.enabled).toBe(false);
    for (let i = 0; i < 100; i++) expect(await limiter.take('a')).toEqual({ allowed: true });
  });

  it('burst 0 means a bucket of perMinute', async () => {
    const clock = new ManualClock();
    const limiter = new SenderRateLimiter({ perMinute: 2, burst: 0 }, clock);
    expect(limiter.enabled).toBe(true);
    expect([await limiter.take('a'), await limiter.take('a')]).toEqual([{ allowed: true }, { allowed: true }]);
    expect(await limiter.take('a')).toEqual({ allowed: false, retryAfterMs: 30_000, notify: true });
  });

  it('allows a burst, then one message per refill interval; says exactly how long to wait', async () => {
    const clock = new ManualClock();
    const limiter = new SenderRateLimiter({ perMinute: 6, burst: 3 }, clock); // one token per 10 s
    for (let i = 0; i < 3; i++) expect(await limiter.take('alice')).toEqual({ allowed: true });
    expect(await limiter.take('alice')).toEqual({ allowed: false, retryAfterMs: 10_000, notify: true });
    clock.advance(4_000);
    expect(await limiter.take('alice')).toEqual({ allowed: false, retryAfterMs: 6_000, notify: false });
    clock.advance(5_999);
    expect(await limiter.take('alice')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    clock.advance(1);
    expect(await limiter.take('alice')).toEqual({ allowed: true });
    expect(await limiter.take('alice')).toMatchObject({ allowed: false, retryAfterMs: 10_000 });
  });

  it('senders have their own buckets', async () => {
    const limiter = new SenderRateLimiter({ perMinute: 1, burst: 1 }, new ManualClock());
    expect(await limiter.take('telegram:1')).toEqual({ allowed: true });
    expect((await limiter.take('telegram:1')).allowed).toBe(false);
    expect(await limiter.take('telegram:2')).toEqual({ allowed: true });
    expect(await limiter.take('discord:1')).toEqual({ allowed: true });
  });

  it('refills up to the burst only, however long the sender was away', async () => {
    const clock = new ManualClock();
    const limiter = new SenderRateLimiter({ perMinute: 60, burst: 2 }, clock);
    await limiter.take('a');
    clock.advance(3_600_000);
    expect([(await limiter.take('a')), (await limiter.take('a'))].every((d) => d.allowed)).toBe(true);
    expect((await limiter.take('a')).allowed).toBe(false);
  });

  it('tells a sender to slow down once per minute of refusals', async () => {
    const clock = new ManualClock();
    const limiter = new SenderRateLimiter({ perMinute: 1, burst: 1 }, clock);
    await limiter.take('a');
    expect(await limiter.take('a')).toMatchObject({ allowed: false, notify: true });
    clock.advance(30_000);
    expect(await limiter.take('a')).toMatchObject({ allowed: false, notify: false });
    clock.advance(29_999);
    expect(await limiter.take('a')).toMatchObject({ allowed: false, notify: false });
    // 60 s after the notice a token is back: allowed, and the next refusal is told again.
    clock.advance(1);
    expect(await limiter.take('a')).toEqual({ allowed: true });
    expect(await limiter.take('a')).toMatchObject({ allowed: false, notify: true, retryAfterMs: 60_000 });
  });

  it('a refusal right at a minute after the last notice is notified again', async () => {
    const clock = new ManualClock();
    const limiter = new SenderRateLimiter({ perMinute: 0.5, burst: 1 }, clock); // a token every 2 minutes
    await limiter.take('a');
    expect(await limiter.take('a')).toMatchObject({ notify: true, retryAfterMs: 120_000 });
    clock.advance(59_999);
    expect(await limiter.take('a')).toMatchObject({ allowed: false, notify: false });
    clock.advance(1);
    expect(await limiter.take('a')).toMatchObject({ allowed: false, notify: true, retryAfterMs: 60_000 });
  });

  it('remembers at most 100,000 senders: the one idle longest is forgotten first (and starts again with a full bucket)', async () => {
    const limiter = new SenderRateLimiter({ perMinute: 1, burst: 1 }, new ManualClock());
    expect(await limiter.take('first')).toEqual({ allowed: true });
    expect(await limiter.take('second')).toEqual({ allowed: true });
    expect((await limiter.take('first')).allowed).toBe(false); // a new sender does not push out a recent one
    for (let i = 0; i < 99_998; i++) await limiter.take(`sender${i}`);
    expect((await limiter.take('second')).allowed).toBe(false); // 100,000 remembered: still known
    await limiter.take('one more');
    expect(await limiter.take('first')).toEqual({ allowed: true });
  });
});

