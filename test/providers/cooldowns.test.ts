import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { CooldownBook } from '../../src/providers/cooldowns.ts';

describe('CooldownBook', () => {
  const start = Date.UTC(2026, 0, 1);

  it('cools a credential down for 10 s after a failure, doubling per failure in a row up to 5 min', () => {
    const clock = new ManualClock(start);
    const book = new CooldownBook({ clock });
    const seen: number[] = [];
    for (let i = 0; i < 8; i++) {
      const until = book.fail('p', 0, 'PROVIDER_RATE_LIMITED');
      expect(book.coolingUntil('p', 0)).toBe(until);
      seen.push(until - clock.now());
      clock.set(until);
      expect(book.coolingUntil('p', 0)).toBeUndefined();
    }
    expect(seen).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000]);
  });

  it('keys cooldowns by provider and key index', () => {
    const clock = new ManualClock(start);
    const book = new CooldownBook({ clock });
    book.fail('p', 1, 'PROVIDER_OVERLOADED');
    expect(book.coolingUntil('p', 1)).toBe(start + 10_000);
    expect(book.coolingUntil('p', 0)).toBeUndefined();
    expect(book.coolingUntil('q', 1)).toBeUndefined();
  });

  it('clears the backoff on success: the next failure starts at the base again', () => {
    const clock = new ManualClock(start);
    const book = new CooldownBook({ clock });
    book.fail('p', 0, 'PROVIDER_TIMEOUT');
    book.fail('p', 0, 'PROVIDER_TIMEOUT');
    expect(book.coolingUntil('p', 0)).toBe(start + 20_000);
    book.succeed('p', 0);
    expect(book.coolingUntil('p', 0)).toBeUndefined();
    expect(book.snapshot()).toEqual([]);
    expect(book.fail('p', 0, 'PROVIDER_TIMEOUT')).toBe(start + 10_000);
  });

  it('cools a refused key straight down for 30 min', () => {
    const clock = new ManualClock(start);
    const book = new CooldownBook({ clock });
    expect(book.fail('p', 2, 'PROVIDER_AUTH')).toBe(start + 30 * 60_000);
    clock.advance(29 * 60_000);
    expect(book.coolingUntil('p', 2)).toBe(start + 30 * 60_000);
  });

  it('takes its base, cap and auth cooldown from the options', () => {
    const clock = new ManualClock(start);
    const book = new CooldownBook({ clock, baseMs: 100, maxMs: 250, authMs: 1000 });
    expect(book.fail('p', 0, 'PROVIDER_UNAVAILABLE')).toBe(start + 100);
    expect(book.fail('p', 0, 'PROVIDER_UNAVAILABLE')).toBe(start + 200);
    expect(book.fail('p', 0, 'PROVIDER_UNAVAILABLE')).toBe(start + 250);
    expect(book.fail('q', 0, 'PROVIDER_AUTH')).toBe(start + 1000);
  });

  it('snapshots the active cooldowns only, soonest first, as copies', () => {
    const clock = new ManualClock(start);
    const book = new CooldownBook({ clock });
    book.fail('a', 0, 'PROVIDER_AUTH');
    book.fail('b', 1, 'PROVIDER_RATE_LIMITED');
    book.fail('b', 1, 'PROVIDER_OVERLOADED');
    book.fail('c', 0, 'PROVIDER_TIMEOUT');
    clock.advance(15_000);
    const snapshot = book.snapshot();
    expect(snapshot).toEqual([
      { providerId: 'b', keyIndex: 1, until: start + 20_000, failures: 2, lastCode: 'PROVIDER_OVERLOADED' },
      { providerId: 'a', keyIndex: 0, until: start + 30 * 60_000, failures: 1, lastCode: 'PROVIDER_AUTH' },
    ]);
    snapshot[0]!.until = 0;
    expect(book.coolingUntil('b', 1)).toBe(start + 20_000);
  });
});
