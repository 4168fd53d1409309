import { describe, expect, it } from 'vitest';
import { evaluateReset, expiresAt, lastDailyBoundary, resolveResetPolicy, type ResetPolicy } from '../../src/sessions/reset.ts';

const at = (iso: string) => Date.parse(iso);
const daily = (over: Partial<ResetPolicy> = {}): ResetPolicy => ({ mode: 'daily', atHour: 4, idleMinutes: 0, timezone: 'UTC', ...over });

describe('evaluateReset', () => {
  it.each([
    ['daily: activity before today 04:00, now after it → daily', daily(), '2026-03-10T03:59:00Z', '2026-03-10T04:00:00Z', 'daily'],
    ['daily: activity after 04:00 today → fresh', daily(), '2026-03-10T04:00:00Z', '2026-03-10T23:00:00Z', undefined],
    ['daily: before 04:00 both times → fresh', daily(), '2026-03-10T00:10:00Z', '2026-03-10T03:50:00Z', undefined],
    ['daily: yesterday 05:00 to today 03:00 → fresh (boundary not passed)', daily(), '2026-03-09T05:00:00Z', '2026-03-10T03:00:00Z', undefined],
    ['daily: two days old → daily', daily(), '2026-03-08T12:00:00Z', '2026-03-10T03:00:00Z', 'daily'],
    ['daily in Berlin: 02:59 UTC is 03:59 local, 03:00 UTC is 04:00 local', daily({ timezone: 'Europe/Berlin' }), '2026-01-15T02:59:00Z', '2026-01-15T03:00:00Z', 'daily'],
    ['idle: 30 min idle after 31 min → idle', { mode: 'idle', atHour: 4, idleMinutes: 30 } as ResetPolicy, '2026-03-10T10:00:00Z', '2026-03-10T10:31:00Z', 'idle'],
    ['idle: 29 min → fresh', { mode: 'idle', atHour: 4, idleMinutes: 30 } as ResetPolicy, '2026-03-10T10:00:00Z', '2026-03-10T10:29:00Z', undefined],
    ['idle mode ignores the daily boundary', { mode: 'idle', atHour: 4, idleMinutes: 600 } as ResetPolicy, '2026-03-10T03:00:00Z', '2026-03-10T05:00:00Z', undefined],
    ['off never resets', { mode: 'off', atHour: 4, idleMinutes: 1 } as ResetPolicy, '2020-01-01T00:00:00Z', '2026-03-10T05:00:00Z', undefined],
    ['both: idle expires first → idle', daily({ idleMinutes: 60 }), '2026-03-10T10:00:00Z', '2026-03-10T11:30:00Z', 'idle'],
    ['both: daily boundary first → daily', daily({ idleMinutes: 120 }), '2026-03-10T03:30:00Z', '2026-03-10T04:30:00Z', 'daily'],
    ['idle across the daily boundary: idle expired before 04:00 → idle wins', daily({ idleMinutes: 30 }), '2026-03-10T03:00:00Z', '2026-03-10T05:00:00Z', 'idle'],
    ['idle across the daily boundary: boundary came before idle expiry → daily', daily({ idleMinutes: 90 }), '2026-03-10T03:00:00Z', '2026-03-10T05:00:00Z', 'daily'],
  ])('%s', (_name, policy, last, now, expected) => {
    expect(evaluateReset(policy as ResetPolicy, at(last), at(now))).toBe(expected);
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
