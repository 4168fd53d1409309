import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/core/errors.ts';
import { checkJobSchedules, parseDuration, parseSchedule, ScheduleError, type Schedule } from '../../src/scheduler/schedule.ts';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
const parse = (text: string, timezone?: string, minIntervalSeconds = 60) => parseSchedule(text, { timezone, minIntervalSeconds });
/** The first `n` due times strictly after `after`. */
function runs(schedule: Schedule, after: string, n: number): (string | undefined)[] {
  const out: (string | undefined)[] = [];
  let cursor = at(after);
  for (let i = 0; i < n; i++) {
    const next = schedule.next(cursor);
    out.push(iso(next));
    if (next === undefined) break;
    cursor = next;
  }
  return out;
}
function refusal(fn: () => unknown): ScheduleError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ScheduleError);
    return error as ScheduleError;
  }
  throw new Error('expected a ScheduleError');
}

describe('cron across DST changes (croner: fixed-time jobs run once; a time in the gap runs at the jump)', () => {
  it('Europe/Berlin spring forward (2026-03-29, 02:00 CET → 03:00 CEST): a 02:30 daily job runs once, at 03:00 CEST', () => {
    const s = parse('30 2 * * *', 'Europe/Berlin');
    expect(runs(s, '2026-03-28T00:00:00Z', 3)).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST: 02:30 does not exist
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
    expect(iso(s.latestDue(at('2026-03-28T12:00:00Z'), at('2026-03-29T12:00:00Z')))).toBe('2026-03-29T01:00:00.000Z');
  });

  it('Europe/Berlin fall back (2026-10-25, 03:00 CEST → 02:00 CET): a 02:30 daily job runs once, at the first 02:30', () => {
    const s = parse('30 2 * * *', 'Europe/Berlin');
    expect(runs(s, '2026-10-24T12:00:00Z', 2)).toEqual([
      '2026-10-25T00:30:00.000Z', // 02:30 CEST; not again at 02:30 CET (01:30Z)
      '2026-10-26T01:30:00.000Z', // 02:30 CET
    ]);
    expect(iso(s.latestDue(at('2026-10-24T12:00:00Z'), at('2026-10-25T12:00:00Z')))).toBe('2026-10-25T00:30:00.000Z');
  });

  it('America/New_York spring forward (2026-03-08, 02:00 EST → 03:00 EDT): a 02:30 daily job runs once, at 03:00 EDT', () => {
    const s = parse('30 2 * * *', 'America/New_York');
    expect(runs(s, '2026-03-07T00:00:00Z', 3)).toEqual([
      '2026-03-07T07:30:00.000Z', // 02:30 EST
      '2026-03-08T07:00:00.000Z', // 03:00 EDT
      '2026-03-09T06:30:00.000Z', // 02:30 EDT
    ]);
  });

  it('America/New_York fall back (2026-11-01, 02:00 EDT → 01:00 EST): a 01:30 daily job runs once, at 01:30 EDT', () => {
    const s = parse('30 1 * * *', 'America/New_York');
    expect(runs(s, '2026-10-31T12:00:00Z', 2)).toEqual([
      '2026-11-01T05:30:00.000Z', // 01:30 EDT; not again at 01:30 EST (06:30Z)
      '2026-11-02T06:30:00.000Z', // 01:30 EST
    ]);
    // After the second pass of 01:30 the latest due time is still the first one.
    expect(iso(s.latestDue(at('2026-10-31T12:00:00Z'), at('2026-11-01T07:00:00Z')))).toBe('2026-11-01T05:30:00.000Z');
  });

  it('America/New_York: an interval job (*/30) skips the gap and runs on both passes of the repeated hour', () => {
    const s = parse('*/30 * * * *', 'America/New_York');
    expect(runs(s, '2026-03-08T06:15:00Z', 3)).toEqual(['2026-03-08T06:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-08T07:30:00.000Z']);
    expect(runs(s, '2026-11-01T04:45:00Z', 4)).toEqual([
      '2026-11-01T05:00:00.000Z', '2026-11-01T05:30:00.000Z', // 01:00, 01:30 EDT
      '2026-11-01T06:00:00.000Z', '2026-11-01T06:30:00.000Z', // 01:00, 01:30 EST
    ]);
  });

  it('a list of explicit times counts as fixed times (fixedTimeRule "no-wildcard"): 02:30 not lost in the gap, 01:30 not run twice', () => {
    expect(runs(parse('30 2,14 * * *', 'Europe/Berlin'), '2026-03-28T12:00:00Z', 3)).toEqual([
      '2026-03-28T13:30:00.000Z', // 14:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST, for 02:30
      '2026-03-29T12:30:00.000Z', // 14:30 CEST
    ]);
    expect(runs(parse('30 1,13 * * *', 'America/New_York'), '2026-11-01T00:00:00Z', 2)).toEqual([
      '2026-11-01T05:30:00.000Z', // 01:30 EDT; not again at 01:30 EST
      '2026-11-01T18:30:00.000Z', // 13:30 EST
    ]);
  });

  it('without a time zone, the host zone', () => {
    const s = parse('0 9 * * *');
    const nine = new Date(2026, 5, 10, 9, 0, 0).getTime();
    expect(s.next(nine - 1)).toBe(nine);
  });
});

describe('cron due times', () => {
  const s = parse('0 * * * *', 'UTC');

  it('next is strictly after `after`', () => {
    expect(s.kind).toBe('cron');
    expect(iso(s.next(at('2026-01-01T10:00:00Z')))).toBe('2026-01-01T11:00:00.000Z');
    expect(iso(s.next(at('2026-01-01T09:59:59.999Z')))).toBe('2026-01-01T10:00:00.000Z');
  });

  it('latestDue includes `at` and excludes `since`', () => {
    expect(iso(s.latestDue(at('2026-01-01T08:30:00Z'), at('2026-01-01T10:00:00Z')))).toBe('2026-01-01T10:00:00.000Z');
    expect(iso(s.latestDue(at('2026-01-01T08:30:00Z'), at('2026-01-01T09:59:59.999Z')))).toBe('2026-01-01T09:00:00.000Z');
    expect(s.latestDue(at('2026-01-01T09:00:00Z'), at('2026-01-01T09:59:59Z'))).toBeUndefined();
    expect(s.latestDue(at('2026-01-01T10:00:00Z'), at('2026-01-01T10:00:00Z'))).toBeUndefined();
  });

  it('latestDue after a month of downtime is one quick look back, not a walk through every minute', () => {
    // Walking the 43,000 minutes with croner takes seconds (6.6 s measured); the look back well under a millisecond.
    const minutely = parse('* * * * *', 'Europe/Berlin');
    const started = performance.now();
    expect(iso(minutely.latestDue(at('2026-05-02T00:00:00Z'), at('2026-06-01T12:34:56.789Z')))).toBe('2026-06-01T12:34:00.000Z');
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('a rare cron looks back past a year: Feb 29 on a Monday', () => {
    const rare = parse('0 0 29 2 +1', 'UTC');
    expect(iso(rare.latestDue(at('2000-01-01T00:00:00Z'), at('2026-06-01T00:00:00Z')))).toBe('2016-02-29T00:00:00.000Z');
    expect(rare.latestDue(at('2016-03-01T00:00:00Z'), at('2026-06-01T00:00:00Z'))).toBeUndefined();
  });
});

describe('every', () => {
  it('due times are multiples of the interval since the epoch, whenever it was parsed', () => {
    const s = parse('every 30m');
    expect(s.kind).toBe('every');
    expect(iso(s.next(at('2026-12-02T10:07:13.500Z')))).toBe('2026-12-02T10:30:00.000Z');
    expect(iso(s.next(at('2026-12-02T10:30:00Z')))).toBe('2026-12-02T11:00:00.000Z');
    expect(iso(s.latestDue(at('2026-12-01T00:00:00Z'), at('2026-12-02T10:59:59.999Z')))).toBe('2026-12-02T10:30:00.000Z');
    expect(iso(s.latestDue(at('2026-12-01T00:00:00Z'), at('2026-12-02T11:00:00Z')))).toBe('2026-12-02T11:00:00.000Z');
    expect(s.latestDue(at('2026-12-02T10:30:00Z'), at('2026-12-02T10:59:00Z'))).toBeUndefined();
    expect(parse('every 30m').next(at('2026-12-02T10:07:13.500Z'))).toBe(s.next(at('2026-12-02T10:07:13.500Z')));
  });

  it('ignores the time zone: every 1d is due at 00:00 UTC', () => {
    expect(iso(parse('every 1d', 'America/New_York').next(at('2026-12-02T10:00:00Z')))).toBe('2026-12-03T00:00:00.000Z');
  });

  it.each(['every 30m', 'every 30 m', 'every30m', '  EVERY   2h ', 'Every 45s'])('accepts "%s"', (text) => {
    expect(parse(text, undefined, 1).kind).toBe('every');
  });

  it.each(['every', 'every 30', 'every 30x', 'every 0m', 'every -5m', 'every 1.5h', 'every 30 minutes', 'every 30M', 'every 1e3s'])('refuses "%s" as invalid', (text) => {
    const error = refusal(() => parse(text));
    expect(error.code).toBe('SCHEDULE_INVALID');
    expect(error.message).toContain(`"${text}"`);
  });
});

describe('too frequent', () => {
  it('every 1s is refused at 60 s, naming the setting', () => {
    const error = refusal(() => parse('every 1s'));
    expect(error.code).toBe('SCHEDULE_TOO_FREQUENT');
    expect(error.status).toBe(400);
    expect(error.message).toContain('"every 1s"');
    expect(error.message).toContain('scheduler.minIntervalSeconds');
    expect(error.message).toContain('every 1m');
  });

  it('an interval of exactly the minimum is allowed, one second less is not', () => {
    expect(parse('every 1m').kind).toBe('every');
    expect(refusal(() => parse('every 59s')).code).toBe('SCHEDULE_TOO_FREQUENT');
    expect(parse('every 1s', undefined, 1).kind).toBe('every');
  });

  it('a 6-field cron firing every second is refused', () => {
    const error = refusal(() => parse('* * * * * *'));
    expect(error.code).toBe('SCHEDULE_TOO_FREQUENT');
    expect(error.message).toContain('every 1s');
  });

  it.each([
    ['*/5 * * * *', 60, true], ['* * * * *', 60, true], ['* * * * *', 61, false], ['*/30 * * * * *', 60, false],
    ['0,30 0 9 * * *', 60, false], ['0 0,59 9 * * *', 3600, false], ['0 0 9 * * *', 60, true],
  ] as const)('%s at %i s: allowed %s', (text, min, allowed) => {
    if (allowed) expect(parse(text, 'UTC', min).kind).toBe('cron');
    else expect(refusal(() => parse(text, 'UTC', min)).code).toBe('SCHEDULE_TOO_FREQUENT');
  });

  it('counts the gap across midnight, on consecutive matching days only', () => {
    // 23:59 then 00:00 the next day: a minute apart when both days match.
    expect(refusal(() => parse('0 0,59 0,23 * * *', 'UTC', 120)).code).toBe('SCHEDULE_TOO_FREQUENT');
    expect(refusal(() => parse('0 0,59 0,23 * * 1,2', 'UTC', 120)).code).toBe('SCHEDULE_TOO_FREQUENT');
    expect(parse('0 0,59 0,23 * * 1', 'UTC', 120).kind).toBe('cron');
    // A daily job against a two-day minimum; a weekly one passes.
    expect(refusal(() => parse('0 9 * * *', 'UTC', 2 * 86_400)).message).toContain('every 1d');
    expect(parse('0 9 * * 1', 'UTC', 2 * 86_400).kind).toBe('cron');
    expect(refusal(() => parse('@daily', 'UTC', 2 * 86_400)).code).toBe('SCHEDULE_TOO_FREQUENT');
  });
});

describe('one-off ISO time', () => {
  it('without offset, in the time zone; once past, next is undefined but latestDue still returns it after `since`', () => {
    const s = parse('2026-12-02T17:00', 'Europe/Berlin');
    const due = at('2026-12-02T16:00:00Z');
    expect(s.kind).toBe('once');
    expect(s.next(due - 1)).toBe(due);
    expect(s.next(due)).toBeUndefined();
    const now = at('2026-12-03T08:00:00Z');
    expect(s.next(now)).toBeUndefined();
    expect(s.latestDue(at('2026-12-01T00:00:00Z'), now)).toBe(due);
    expect(s.latestDue(due, now)).toBeUndefined();
    expect(s.latestDue(at('2026-12-01T00:00:00Z'), due - 1)).toBeUndefined();
  });

  it.each([
    ['2026-12-02T17:00+02:00', '2026-12-02T15:00:00.000Z'],
    ['2026-12-02T17:00:30-0500', '2026-12-02T22:00:30.000Z'],
    ['2026-12-02T17:00:00.250Z', '2026-12-02T17:00:00.250Z'],
    ['2026-12-02 17:00', '2026-12-02T16:00:00.000Z'],
    ['2026-03-29T02:30', '2026-03-29T01:30:00.000Z'], // in the gap: moved forward by it, 03:30 CEST
    ['2026-10-25T02:30', '2026-10-25T00:30:00.000Z'], // repeated: the first pass, 02:30 CEST
  ])('%s in Europe/Berlin is %s', (text, expected) => {
    expect(iso(parse(text, 'Europe/Berlin').next(0))).toBe(expected);
  });

  it('without offset or zone, the host zone', () => {
    expect(parse('2026-12-02T17:00').next(0)).toBe(new Date(2026, 11, 2, 17, 0, 0).getTime());
  });
});

describe('invalid schedules', () => {
  it.each([
    ['', 'not a valid cron expression'],
    ['tomorrow at nine', 'not a valid cron expression'],
    ['61 * * * *', 'minute'],
    ['* * * *', 'not a valid cron expression'],
    ['* * * * * * *', '5 or 6 parts'],
    ['@reboot', 'not a valid cron expression'],
    ['0 0 30 2 *', 'never fires'],
    ['2026-02-30T10:00', 'not a valid date and time'],
    ['2026-12-02T25:00', 'not a valid date and time'],
    ['2026-12-02T17:00+25:00', 'invalid UTC offset'],
    ['2026-12-02', 'no time of day'],
    ['2026-12-02T17', 'not a valid ISO time'],
  ])('"%s": SCHEDULE_INVALID, %s', (text, reason) => {
    const error = refusal(() => parse(text, 'UTC'));
    expect(error.code).toBe('SCHEDULE_INVALID');
    expect(error.status).toBe(400);
    expect(error.field).toBe('schedule');
    expect(error.message).toContain(`"${text}"`);
    expect(error.message).toContain(reason);
  });

  it.each(['0 9 * * *', 'every 30m', '2026-12-02T17:00'])('an unknown time zone is refused for "%s"', (text) => {
    const error = refusal(() => parse(text, 'Mars/Olympus'));
    expect(error.code).toBe('SCHEDULE_INVALID');
    expect(error.field).toBe('timezone');
    expect(error.message).toContain('"Mars/Olympus"');
    expect(error.message).toContain(text);
  });
});

describe('checkJobSchedules', () => {
  it('passes valid jobs, a past one-off included', () => {
    expect(() => checkJobSchedules([
      { id: 'standup', schedule: '0 9 * * 1-5', timezone: 'Europe/Berlin' },
      { id: 'poll', schedule: 'every 5m' },
      { id: 'remind', schedule: '2020-01-01T09:00Z' },
    ], 60)).not.toThrow();
  });

  it('names each bad job and, for a too-frequent one, the setting', () => {
    let error: unknown;
    try {
      checkJobSchedules([
        { id: 'ok', schedule: '0 9 * * *' },
        { id: 'spam', schedule: '* * * * * *' },
        { id: 'typo', schedule: '0 9 * *' },
        { id: 'mars', schedule: '0 9 * * *', timezone: 'Mars/Olympus' },
      ], 60);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const { message, issues } = error as ConfigError;
    expect(issues).toHaveLength(3);
    expect(issues[0]).toMatch(/^jobs\[spam\]\.schedule: .*"\* \* \* \* \* \*".*scheduler\.minIntervalSeconds/);
    expect(issues[1]).toMatch(/^jobs\[typo\]\.schedule: Schedule "0 9 \* \*" is not a valid cron expression/);
    expect(issues[1]).not.toContain('minIntervalSeconds');
    expect(issues[2]).toMatch(/^jobs\[mars\]\.timezone: Unknown time zone "Mars\/Olympus"/);
    expect(message).toContain('jobs[spam].schedule');
    expect(message).not.toContain('jobs[ok]');
  });
});

describe('parseDuration', () => {
  it.each([['30m', 1_800_000], ['1h', 3_600_000], ['45s', 45_000], ['2d', 172_800_000], ['30 m', 1_800_000], [' 5s ', 5000]])('%s → %i ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['30', 'm', '1.5h', '0m', '30min', '', '-5m', '30M', '99999999999999999d'])('refuses "%s"', (text) => {
    const error = refusal(() => parseDuration(text));
    expect(error.code).toBe('SCHEDULE_INVALID');
    expect(error.message).toContain(`"${text}"`);
  });
});

describe('shared schedules', () => {
  it('jobs with the same schedule, zone and minimum share one parsed schedule (10,000 jobs load in a second, not four)', () => {
    const options = { timezone: 'Europe/Berlin', minIntervalSeconds: 60 };
    const a = parseSchedule('0 8 * * *', options);
    expect(parseSchedule('0 8 * * *', options)).toBe(a);
    expect(parseSchedule('0 8 * * *', { ...options, timezone: 'UTC' })).not.toBe(a);
    expect(parseSchedule('0 8 * * *', { ...options, minIntervalSeconds: 30 })).not.toBe(a);
    // A schedule refused once is refused again (a refusal is not kept as a schedule).
    expect(() => parseSchedule('* * * * * *', options)).toThrow(ScheduleError);
    expect(() => parseSchedule('* * * * * *', options)).toThrow(ScheduleError);
  });
});
