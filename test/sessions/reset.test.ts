import { describe, expect, it } from 'vitest';
import { evaluateReset, expiresAt, lastDailyBoundary, resolveResetPolicy, type ResetPolicy } from '../../src/sessions/reset.ts';

const at = (iso: string) => Date.parse(iso);
const daily = (over: Partial<ResetPolicy> = {}): ResetPolicy => ({ mode: 'daily', atHour: 4, idleMinutes: 0, timezone: 'UTC', ...over });
const idleOnly = (idleMinutes: number): ResetPolicy => ({ mode: 'idle', atHour: 4, idleMinutes });

describe('evaluateReset', () => {
  it.each([
    ['daily: activity before today 04:00, now after it → daily', daily(), '2026-03-10T03:59:00Z', '2026-03-10T04:00:00Z', 'daily'],
    ['daily: activity after 04:00 today → fresh', daily(), '2026-03-10T04:00:00Z', '2026-03-10T23:00:00Z', undefined],
    ['daily: before 04:00 both times → fresh', daily(), '2026-03-10T00:10:00Z', '2026-03-10T03:50:00Z', undefined],
    ['daily: yesterday 05:00 to today 03:00 → fresh (boundary not passed)', daily(), '2026-03-09T05:00:00Z', '2026-03-10T03:00:00Z', undefined],
    ['daily: two days old → daily', daily(), '2026-03-08T12:00:00Z', '2026-03-10T03:00:00Z', 'daily'],
    ['daily in Berlin: 02:59 UTC is 03:59 local, 03:00 UTC is 04:00 local', daily({ timezone: 'Europe/Berlin' }), '2026-01-15T02:59:00Z', '2026-01-15T03:00:00Z', 'daily'],
    ['idle: 30 min idle after 31 min → idle', idleOnly(30), '2026-03-10T10:00:00Z', '2026-03-10T10:31:00Z', 'idle'],
    ['idle: 29 min → fresh', idleOnly(30), '2026-03-10T10:00:00Z', '2026-03-10T10:29:00Z', undefined],
    ['idle mode ignores the daily boundary', idleOnly(600), '2026-03-10T03:00:00Z', '2026-03-10T05:00:00Z', undefined],
    ['off never resets', { ...idleOnly(1), mode: 'off' as const }, '2020-01-01T00:00:00Z', '2026-03-10T05:00:00Z', undefined],
    ['both: idle expires first → idle', daily({ idleMinutes: 60 }), '2026-03-10T10:00:00Z', '2026-03-10T11:30:00Z', 'idle'],
    ['both: daily boundary first → daily', daily({ idleMinutes: 120 }), '2026-03-10T03:30:00Z', '2026-03-10T04:30:00Z', 'daily'],
    ['idle across the daily boundary: idle expired before 04:00 → idle wins', daily({ idleMinutes: 30 }), '2026-03-10T03:00:00Z', '2026-03-10T05:00:00Z', 'idle'],
    ['idle across the daily boundary: boundary came before idle expiry → daily', daily({ idleMinutes: 90 }), '2026-03-10T03:00:00Z', '2026-03-10T05:00:00Z', 'daily'],
  ])('%s', (_name, policy, last, now, expected) => {
    expect(evaluateReset(policy, at(last), at(now))).toBe(expected);
  });
});

describe('daily boundary across DST changes', () => {
  it('spring forward in New York: 02:00 does not exist on 2026-03-08; the boundary is the jump (07:00 UTC = 03:00 EDT)', () => {
    expect(new Date(lastDailyBoundary(at('2026-03-08T12:00:00Z'), 2, 'America/New_York')).toISOString()).toBe('2026-03-08T07:00:00.000Z');
    const policy = daily({ atHour: 2, timezone: 'America/New_York' });
    expect(evaluateReset(policy, at('2026-03-08T06:59:00Z'), at('2026-03-08T07:00:00Z'))).toBe('daily');
    expect(evaluateReset(policy, at('2026-03-08T07:00:00Z'), at('2026-03-08T20:00:00Z'))).toBeUndefined();
  });

  it('fall back in New York: 01:00 happens twice on 2026-11-01; the first one counts', () => {
    expect(new Date(lastDailyBoundary(at('2026-11-01T12:00:00Z'), 1, 'America/New_York')).toISOString()).toBe('2026-11-01T05:00:00.000Z');
    const policy = daily({ atHour: 1, timezone: 'America/New_York' });
    // Activity in the repeated hour (after the first 01:00) is fresh; no second reset at the second 01:00.
    expect(evaluateReset(policy, at('2026-11-01T05:30:00Z'), at('2026-11-01T06:30:00Z'))).toBeUndefined();
  });

  it('the 04:00 Berlin boundary moves from 03:00 UTC to 02:00 UTC over the March change', () => {
    expect(new Date(lastDailyBoundary(at('2026-03-28T12:00:00Z'), 4, 'Europe/Berlin')).toISOString()).toBe('2026-03-28T03:00:00.000Z');
    expect(new Date(lastDailyBoundary(at('2026-03-29T12:00:00Z'), 4, 'Europe/Berlin')).toISOString()).toBe('2026-03-29T02:00:00.000Z');
    // A session last active at 02:30 UTC on the change day (04:30 CEST, after the boundary) is fresh.
    expect(evaluateReset(daily({ timezone: 'Europe/Berlin' }), at('2026-03-29T02:30:00Z'), at('2026-03-29T20:00:00Z'))).toBeUndefined();
    // One last active at 01:30 UTC (03:30 CEST... before 04:00 local) is stale after 02:00 UTC.
    expect(evaluateReset(daily({ timezone: 'Europe/Berlin' }), at('2026-03-29T01:30:00Z'), at('2026-03-29T02:00:00Z'))).toBe('daily');
  });

  it('a day with 23 or 25 hours still has exactly one boundary', () => {
    const b1 = lastDailyBoundary(at('2026-10-25T12:00:00Z'), 4, 'Europe/Berlin');
    const b0 = lastDailyBoundary(b1 - 1, 4, 'Europe/Berlin');
    expect(b1 - b0).toBe(25 * 3_600_000);
  });
});

describe('expiresAt', () => {
  it('is the earlier of the idle limit and the next daily boundary', () => {
    expect(new Date(expiresAt(daily({ idleMinutes: 60 }), at('2026-03-10T03:30:00Z'))).toISOString()).toBe('2026-03-10T04:00:00.000Z');
    expect(new Date(expiresAt(daily({ idleMinutes: 60 }), at('2026-03-10T10:00:00Z'))).toISOString()).toBe('2026-03-10T11:00:00.000Z');
    expect(expiresAt({ mode: 'off', atHour: 4, idleMinutes: 0 }, 0)).toBe(Infinity);
  });
});

describe('resolveResetPolicy', () => {
  const config = {
    reset: { mode: 'daily' as const, atHour: 5, timezone: 'Europe/Berlin' },
    resetByType: { group: { mode: 'idle' as const, idleMinutes: 120 }, thread: { idleMinutes: 30 } },
    resetByChannel: { discord: { mode: 'off' as const } },
  };

  it('merges resetByType over reset', () => {
    expect(resolveResetPolicy(config, { channel: 'telegram', chatType: 'direct', isThread: false })).toEqual({ mode: 'daily', atHour: 5, idleMinutes: 0, timezone: 'Europe/Berlin' });
    expect(resolveResetPolicy(config, { channel: 'telegram', chatType: 'group', isThread: false })).toEqual({ mode: 'idle', atHour: 5, idleMinutes: 120, timezone: 'Europe/Berlin' });
    expect(resolveResetPolicy(config, { channel: 'slack', chatType: 'channel', isThread: true })).toEqual({ mode: 'daily', atHour: 5, idleMinutes: 30, timezone: 'Europe/Berlin' });
  });

  it('resetByChannel replaces both', () => {
    expect(resolveResetPolicy(config, { channel: 'discord', chatType: 'group', isThread: true })).toEqual({ mode: 'off', atHour: 4, idleMinutes: 0 });
  });

  it("a session's own time zone (/timezone) wins", () => {
    expect(resolveResetPolicy(config, { channel: 'telegram', chatType: 'direct', isThread: false, timezone: 'Asia/Tokyo' }).timezone).toBe('Asia/Tokyo');
  });
});

describe('evaluateReset: the edges', () => {
  const idle = (idleMinutes: number): ResetPolicy => ({ mode: 'idle', atHour: 4, idleMinutes });
  it('idle: exactly the idle time is not yet stale, one millisecond more is', () => {
    const last = at('2026-03-10T10:00:00Z');
    expect(evaluateReset(idle(30), last, last + 30 * 60_000)).toBeUndefined();
    expect(evaluateReset(idle(30), last, last + 30 * 60_000 + 1)).toBe('idle');
  });

  it('idle with idleMinutes 0 never expires, in idle or daily mode', () => {
    expect(evaluateReset(idle(0), 0, at('2026-03-10T10:00:00Z'))).toBeUndefined();
    expect(evaluateReset(daily(), at('2026-03-10T04:00:00Z'), at('2026-03-11T03:59:59Z'))).toBeUndefined();
  });

  it('daily: activity exactly at the boundary is fresh, one millisecond before it is stale', () => {
    const boundary = at('2026-03-10T04:00:00Z');
    expect(evaluateReset(daily(), boundary, boundary + 1)).toBeUndefined();
    expect(evaluateReset(daily(), boundary - 1, boundary)).toBe('daily');
    expect(evaluateReset(daily(), boundary - 1, boundary - 1)).toBeUndefined();
  });

  it('both expired at the same instant: idle is named', () => {
    // Idle 60 min from 03:00 expires at 04:00, the daily boundary.
    expect(evaluateReset(daily({ idleMinutes: 60 }), at('2026-03-10T03:00:00Z'), at('2026-03-10T05:00:00Z'))).toBe('idle');
    expect(evaluateReset(daily({ idleMinutes: 61 }), at('2026-03-10T03:00:00Z'), at('2026-03-10T05:00:00Z'))).toBe('daily');
  });

  it('daily with idle: only the idle time expired (same day) → idle; nothing expired → fresh', () => {
    expect(evaluateReset(daily({ idleMinutes: 10 }), at('2026-03-10T05:00:00Z'), at('2026-03-10T05:11:00Z'))).toBe('idle');
    expect(evaluateReset(daily({ idleMinutes: 10 }), at('2026-03-10T05:00:00Z'), at('2026-03-10T05:09:00Z'))).toBeUndefined();
  });
});

describe('expiresAt: every mode', () => {
  it('idle mode: last activity + idle time, or never', () => {
    expect(expiresAt({ mode: 'idle', atHour: 4, idleMinutes: 30 }, 1000)).toBe(1000 + 30 * 60_000);
    expect(expiresAt({ mode: 'idle', atHour: 4, idleMinutes: 0 }, 1000)).toBe(Infinity);
  });

  it('daily without idle: the next boundary, strictly after the last activity', () => {
    expect(expiresAt(daily(), at('2026-03-10T04:00:00Z'))).toBe(at('2026-03-11T04:00:00Z'));
    expect(expiresAt(daily(), at('2026-03-10T03:59:59Z'))).toBe(at('2026-03-10T04:00:00Z'));
    expect(expiresAt(daily({ timezone: 'Asia/Tokyo', atHour: 0 }), at('2026-03-10T16:00:00Z'))).toBe(at('2026-03-11T15:00:00Z'));
  });
});

describe('lastDailyBoundary: the per-zone cache never answers for another zone, hour or day', () => {
  it('interleaved zones and hours get their own boundaries', () => {
    const now = at('2026-06-15T12:00:00Z');
    const expected: [number, string | undefined, string][] = [
      [4, 'UTC', '2026-06-15T04:00:00.000Z'],
      [4, 'Asia/Tokyo', '2026-06-14T19:00:00.000Z'],
      [4, 'America/Los_Angeles', '2026-06-15T11:00:00.000Z'],
      [13, 'UTC', '2026-06-14T13:00:00.000Z'],
      [0, 'UTC', '2026-06-15T00:00:00.000Z'],
      [13, 'Asia/Tokyo', '2026-06-15T04:00:00.000Z'],
    ];
    for (let round = 0; round < 2; round++) {
      for (const [hour, zone, iso] of expected) expect(new Date(lastDailyBoundary(now, hour, zone)).toISOString()).toBe(iso);
    }
  });

  it('moving forward: the cached day ends exactly at the next boundary', () => {
    const b = at('2026-06-15T04:00:00Z');
    expect(lastDailyBoundary(b + 1000, 4, 'UTC')).toBe(b);
    expect(lastDailyBoundary(b + 86_400_000 - 1, 4, 'UTC')).toBe(b);
    expect(lastDailyBoundary(b + 86_400_000, 4, 'UTC')).toBe(b + 86_400_000);
    expect(lastDailyBoundary(b + 86_400_000 + 5, 4, 'UTC')).toBe(b + 86_400_000);
  });

  it('moving backward (an old timestamp after a recent one) is not answered from the cache', () => {
    const b = at('2026-06-15T04:00:00Z');
    expect(lastDailyBoundary(b + 3_600_000, 4, 'Europe/Paris')).toBe(at('2026-06-15T02:00:00Z'));
    const day = at('2026-06-20T02:00:00Z');
    expect(lastDailyBoundary(day + 1, 4, 'Europe/Paris')).toBe(day);
    expect(lastDailyBoundary(day - 1, 4, 'Europe/Paris')).toBe(day - 86_400_000);
    expect(lastDailyBoundary(at('2026-06-15T01:59:59Z'), 4, 'Europe/Paris')).toBe(at('2026-06-14T02:00:00Z'));
  });

  it('the host zone (no time zone) is cached apart from UTC', () => {
    const now = at('2026-06-15T12:00:00Z');
    const host = lastDailyBoundary(now, 4);
    const utc = lastDailyBoundary(now, 4, 'UTC');
    expect(lastDailyBoundary(now, 4)).toBe(host);
    expect(utc).toBe(at('2026-06-15T04:00:00Z'));
    expect(host).toBeLessThanOrEqual(now);
    expect(now - host).toBeLessThan(86_400_000 + 3_600_000);
  });

  it('stays right when many zones and hours are asked (the cache is bounded)', () => {
    const now = at('2026-06-15T12:00:00Z');
    for (let hour = 0; hour < 24; hour++) {
      for (const zone of ['UTC', 'Asia/Kolkata', 'America/New_York', 'Australia/Adelaide', 'Pacific/Chatham', 'Europe/London', 'Africa/Cairo', 'Asia/Kathmandu', 'America/St_Johns', 'Pacific/Kiritimati', 'Etc/GMT+12', 'Asia/Tehran']) {
        const b = lastDailyBoundary(now, hour, zone);
        expect(b).toBeLessThanOrEqual(now);
        expect(now - b).toBeLessThan(86_400_000);
      }
    }
    expect(lastDailyBoundary(now, 4, 'Asia/Kolkata')).toBe(at('2026-06-14T22:30:00Z'));
  });
});

describe('resolveResetPolicy: each field of a patch', () => {
  const none = { reset: {}, resetByType: {}, resetByChannel: {} };
  it('without any configuration: daily at 04:00, no idle, host zone', () => {
    expect(resolveResetPolicy(none, { channel: 'telegram', chatType: 'direct', isThread: false })).toEqual({ mode: 'daily', atHour: 4, idleMinutes: 0 });
  });

  it('each field overrides alone; direct and group types are told apart', () => {
    const config = { reset: { atHour: 7 }, resetByType: { direct: { idleMinutes: 15 }, group: { timezone: 'Asia/Tokyo' } }, resetByChannel: {} };
    expect(resolveResetPolicy(config, { channel: 'slack', chatType: 'direct', isThread: false })).toEqual({ mode: 'daily', atHour: 7, idleMinutes: 15 });
    expect(resolveResetPolicy(config, { channel: 'slack', chatType: 'channel', isThread: false })).toEqual({ mode: 'daily', atHour: 7, idleMinutes: 0, timezone: 'Asia/Tokyo' });
    expect(resolveResetPolicy(config, { channel: 'telegram', chatType: 'group', isThread: false })).toEqual({ mode: 'daily', atHour: 7, idleMinutes: 0, timezone: 'Asia/Tokyo' });
  });

  it('resetByChannel is merged over the built-in defaults only, not over reset', () => {
    const config = { reset: { atHour: 7, idleMinutes: 5 }, resetByType: {}, resetByChannel: { slack: { atHour: 9 } } };
    expect(resolveResetPolicy(config, { channel: 'slack', chatType: 'direct', isThread: false })).toEqual({ mode: 'daily', atHour: 9, idleMinutes: 0 });
    expect(resolveResetPolicy(config, { channel: 'discord', chatType: 'direct', isThread: false })).toEqual({ mode: 'daily', atHour: 7, idleMinutes: 5 });
  });
});
