import { Cron, CronPattern } from 'croner';
import { ConfigError, SwitchboardError } from '../core/errors.ts';

/**
 * A parsed job schedule (SPEC §17): a cron expression, `every <n><unit>`, or a one-off ISO time.
 *
 * Due times are epoch ms. Cron due times follow croner's DST rules (croner 11, as Vixie cron) with its option
 * `fixedTimeRule: "no-wildcard"`: a fixed-time job (no `*` and no step in seconds, minutes and hours, e.g.
 * `30 2 * * *` or `30 2,14 * * 1-5`) whose time falls in a spring-forward gap runs once at the end of the gap
 * (03:00 that day), and runs once, at the first pass, when its time repeats on a fall-back day; an interval job
 * (`*` or a step there, e.g. `*\/30 * * * *`) skips times in the gap and runs on both passes of the repeated hour.
 * (croner's default rule would make lists and ranges interval jobs: `30 2,14 * * *` would lose its 02:30 run on the
 * spring-forward day and run twice at a repeated 02:30.)
 */
export interface Schedule {
  readonly kind: 'cron' | 'every' | 'once';
  /** The text it was parsed from. */
  readonly text: string;
  /** The first due time strictly after `after` (epoch ms); undefined when there is none (a one-off already past). */
  next(after: number): number | undefined;
  /**
   * The last due time at or before `at` and strictly after `since`; undefined when none (used after downtime: a
   * missed run fires once). Its cost does not grow with `at - since`: `every` computes it, cron asks croner for
   * the run before `at` (a backward search from `at`), so a year of downtime costs what a minute does.
   */
  latestDue(since: number, at: number): number | undefined;
}

/** A schedule that cannot be used (HTTP 400): invalid text or time zone, or one that fires too often. */
export class ScheduleError extends SwitchboardError {
  declare readonly code: 'SCHEDULE_INVALID' | 'SCHEDULE_TOO_FREQUENT';
  /** The schedule text refused. */
  readonly schedule: string;
  /** The job field at fault: `timezone` for an unknown zone, else `schedule`. */
  readonly field: 'schedule' | 'timezone';
  constructor(code: ScheduleError['code'], schedule: string, message: string, options: { cause?: unknown; field?: 'schedule' | 'timezone' } = {}) {
    super(code, message, { cause: options.cause, status: 400 });
    this.schedule = schedule;
    this.field = options.field ?? 'schedule';
  }
}

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
type Unit = keyof typeof UNIT_MS;
const DURATION = /^(\d+)\s*([smhd])$/;
/** After the word `every` (any case): a whole number and a lower-case unit, spaces optional. */
const EVERY = /^\s*(\d+)\s*([smhd])$/;
/** `YYYY-MM-DD`, then `THH:MM[:SS[.fff]]` (or a space for the T), then `Z` or `±HH[:]MM`. */
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/i;
const FORMS = 'Write a cron expression of 5 fields (minute hour day-of-month month day-of-week, e.g. "0 9 * * 1-5") or 6 (seconds first), '
  + '"every <n><s|m|h|d>" (e.g. "every 30m"), or an ISO time for a one-off (e.g. "2026-12-02T17:00").';
/** Where the cron checks start: due times have no year field (5 or 6 fields), so any fixed instant will do. */
const REFERENCE = Date.UTC(2026, 0, 1);
const DAY_S = 86_400;
/** The check of a cron's gaps across midnight looks at the matching days of this span (a leap day included). */
const CROSS_DAY_SPAN_MS = 3 * 366 * 86_400_000;
/** Lists and ranges of explicit times are fixed times too (see {@link Schedule}). */
const CRON_OPTIONS = { mode: '5-or-6-parts', fixedTimeRule: 'no-wildcard' } as const;
const NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *', '@monthly': '0 0 1 * *', '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *', '@midnight': '0 0 * * *', '@hourly': '0 * * * *',
};

/**
 * `30m` / `1h` / `45s` / `2d` (a whole positive number, optional spaces, a unit of s, m, h or d) → ms. Used for
 * `every` schedules and the heartbeat's `every`. Throws a {@link ScheduleError} (`SCHEDULE_INVALID`) on anything else.
 */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text.trim());
  const ms = match ? durationMs(match[1]!, match[2] as Unit) : undefined;
  if (ms === undefined) {
    throw new ScheduleError('SCHEDULE_INVALID', text, `"${text}" is not a duration: write a whole number above 0 and a unit (s, m, h or d), e.g. "30m" or "2h".`);
  }
  return ms;
}

/**
 * Parses a job's schedule (SPEC §17) and checks it fires at most once per `minIntervalSeconds`.
 *
 * - A cron expression of 5 or 6 fields (or a croner nickname such as `@daily`) in `timezone` (an IANA zone; default:
 *   the host's). Too frequent when its smallest gap between two runs is below the minimum: the gaps within a day
 *   are computed from the seconds, minutes and hours fields, the gaps across midnight from the matching days of
 *   three years. Not counted: a fall-back hour that repeats can bring an interval job's runs closer than its fields do
 *   (`0 *\/59 1 * * *` in New York: 01:59 EDT, then 01:00 EST a minute later).
 * - `every <n><s|m|h|d>` (spaces optional, `every` in any case): due at the multiples of the interval since the
 *   Unix epoch, so restarts keep the same slots; `every 1d` is due at 00:00 UTC, `every 7d` on Thursdays (the epoch's
 *   weekday); the time zone does not apply.
 * - An ISO time (`2026-12-02T17:00`, seconds optional, `Z` or an offset optional) is a one-off; without an offset it
 *   is read in `timezone` (default: the host's) as croner reads it: a time in a spring-forward gap moves forward by
 *   the gap (02:30 → 03:30), a repeated time is its first pass.
 *
 * Throws a {@link ScheduleError}: `SCHEDULE_INVALID` (with croner's reason for a bad cron expression; an unknown
 * time zone; a cron expression no date matches), `SCHEDULE_TOO_FREQUENT`.
 */
export function parseSchedule(text: string, options: { timezone?: string; minIntervalSeconds: number }): Schedule {
  // Jobs often share a schedule ("0 8 * * *"): a croner instance costs ~0.3 ms and 80 KB (a 10,000-entry year
  // table), so 10,000 jobs took 3.5 s and much memory to load. A schedule is immutable: one serves them all.
  const cacheKey = `${options.timezone ?? ''}\u0000${options.minIntervalSeconds}\u0000${text}`;
  const cached = parsed.get(cacheKey);
  if (cached) return cached;
  const schedule = parseUncached(text, options);
  if (parsed.size >= PARSED_KEPT) parsed.delete(parsed.keys().next().value as string);
  parsed.set(cacheKey, schedule);
  return schedule;
}

/** Schedules parsed lately, by zone, minimum interval and text (invalid ones are not kept: they throw). */
const parsed = new Map<string, Schedule>();
const PARSED_KEPT = 1024;

function parseUncached(text: string, options: { timezone?: string; minIntervalSeconds: number }): Schedule {
  const source = text.trim();
  if (options.timezone !== undefined) checkZone(text, options.timezone);
  const minMs = options.minIntervalSeconds * 1000;
  if (/^every(?![a-z])/i.test(source)) return everySchedule(text, source, minMs);
  if (/^\d{4}-\d{2}-\d{2}/.test(source)) return onceSchedule(text, source, options.timezone);
  return cronSchedule(text, source, options.timezone, minMs);
}

/**
 * Checks every config job's schedule at start (SPEC §17). Throws one {@link ConfigError} listing each bad one as
 * `jobs[<id>].schedule` (`jobs[<id>].timezone` for an unknown zone); a too-frequent one also names the setting
 * `scheduler.minIntervalSeconds`. A one-off time already past is not an error.
 */
export function checkJobSchedules(jobs: readonly { id: string; schedule: string; timezone?: string }[], minIntervalSeconds: number): void {
  const issues: string[] = [];
  for (const job of jobs) {
    try {
      parseSchedule(job.schedule, { timezone: job.timezone, minIntervalSeconds });
    } catch (error) {
      if (!(error instanceof ScheduleError)) throw error;
      const fix = error.code === 'SCHEDULE_TOO_FREQUENT' ? ' Make the job run less often, or lower scheduler.minIntervalSeconds.' : '';
      issues.push(`jobs[${job.id}].${error.field}: ${error.message}${fix}`);
    }
  }
  if (issues.length) throw new ConfigError(`Invalid configuration:\n  - ${issues.join('\n  - ')}`, issues);
}

function durationMs(count: string, unit: Unit): number | undefined {
  const ms = Number(count) * UNIT_MS[unit];
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined;
}

function checkZone(text: string, timezone: string): void {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch (error) {
    throw new ScheduleError('SCHEDULE_INVALID', text, `Unknown time zone "${timezone}" for schedule "${text}": use an IANA name such as "Europe/Berlin" or "America/New_York".`, { cause: error, field: 'timezone' });
  }
}

function invalid(text: string, why: string, cause?: unknown): ScheduleError {
  return new ScheduleError('SCHEDULE_INVALID', text, `Schedule "${text}" ${why}. ${FORMS}`, { cause });
}

/** `90000` → `90s`, `1800000` → `30m`: the largest unit that divides it (the `every` syntax). */
function span(ms: number): string {
  for (const unit of ['d', 'h', 'm'] as const) if (ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms} ms`;
}

function tooFrequent(text: string, gapMs: number, minMs: number): ScheduleError {
  return new ScheduleError('SCHEDULE_TOO_FREQUENT', text,
    `Schedule "${text}" would run as often as every ${span(gapMs)}, more often than scheduler.minIntervalSeconds allows (${minMs / 1000} s): `
    + `choose a schedule with at least ${span(minMs)} between runs, e.g. "every ${span(Math.ceil(minMs / 1000) * 1000)}".`);
}

function everySchedule(text: string, source: string, minMs: number): Schedule {
  const match = EVERY.exec(source.slice('every'.length));
  const interval = match ? durationMs(match[1]!, match[2] as Unit) : undefined;
  if (interval === undefined) throw invalid(text, 'is not a valid interval: write "every" and a whole number above 0 with a unit of s, m, h or d, e.g. "every 30m"');
  if (interval < minMs) throw tooFrequent(text, interval, minMs);
  return {
    kind: 'every',
    text,
    next: (after) => Math.floor(after / interval) * interval + interval,
    latestDue(since, at) {
      const slot = Math.floor(at / interval) * interval;
      return slot > since ? slot : undefined;
    },
  };
}

function onceSchedule(text: string, source: string, timezone: string | undefined): Schedule {
  const m = ISO.exec(source);
  if (!m) throw invalid(text, 'is not a valid ISO time');
  const [, y, mo, d, h, mi, s = '00', frac = '', offset] = m as unknown as (string | undefined)[];
  if (h === undefined || mi === undefined) throw invalid(text, `has no time of day: add one, e.g. "${source}T09:00"`);
  const [year, month, day, hour, minute, second] = [y, mo, d, h, mi, s].map(Number) as [number, number, number, number, number, number];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (year < 1970 || month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) {
    throw invalid(text, 'is not a valid date and time (no such day, hour, minute or second)');
  }
  const ms = Number(frac.padEnd(3, '0'));
  let at: number;
  if (offset !== undefined) {
    const o = /^([+-])(\d{2}):?(\d{2})$/.exec(offset);
    const offsetMin = o ? (o[1] === '-' ? -1 : 1) * (Number(o[2]) * 60 + Number(o[3])) : 0;
    if (o && (Number(o[2]) > 23 || Number(o[3]) > 59)) throw invalid(text, `has an invalid UTC offset "${offset}"`);
    at = Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMin * 60_000;
  } else {
    // croner reads a local time in the zone (spring-forward gap: moved forward by the gap; fall-back: first pass).
    const local = `${y}-${mo}-${d}T${h}:${mi}:${s}`;
    at = new Cron(local, timezone === undefined ? {} : { timezone }).getOnce()!.getTime() + ms;
  }
  return {
    kind: 'once',
    text,
    next: (after) => (at > after ? at : undefined),
    latestDue: (since, until) => (at > since && at <= until ? at : undefined),
  };
}

function cronSchedule(text: string, source: string, timezone: string | undefined, minMs: number): Schedule {
  const zone = timezone === undefined ? {} : { timezone };
  let cron: Cron;
  let pattern: CronPattern;
  try {
    cron = new Cron(source, { ...zone, ...CRON_OPTIONS });
    pattern = new CronPattern(source, timezone, CRON_OPTIONS);
  } catch (error) {
    const reason = error instanceof Error ? error.message.replace(/^Cron\w*:\s*/, '').replace(/\.$/, '') : String(error);
    throw invalid(text, `is not a valid cron expression: ${reason}`, error);
  }
  if (cron.getOnce() !== null) throw invalid(text, 'is not a valid cron expression');
  if (cron.nextRun(new Date(REFERENCE)) === null) throw invalid(text, 'never fires: no date matches it');
  const gap = smallestGap(source, cron, pattern, timezone, minMs);
  if (gap < minMs) throw tooFrequent(text, gap, minMs);
  return {
    kind: 'cron',
    text,
    next: (after) => cron.nextRun(new Date(after))?.getTime(),
    latestDue(since, at) {
      if (at <= since) return undefined;
      // croner's previous run is strictly before its reference: `at + 1` lets a run at `at` itself count.
      const run = cron.previousRuns(1, new Date(at + 1))[0]?.getTime();
      return run !== undefined && run > since && run <= at ? run : undefined;
    },
  };
}

/**
 * The smallest gap (ms) between two runs, or one below `minMs` as soon as one is found. Within a day it is exact
 * from the fields (the same times of day repeat on each matching day). Across midnight (last run of a day to the
 * next run) it is measured on the matching days of {@link CROSS_DAY_SPAN_MS}, only when it could be below `minMs`.
 */
function smallestGap(source: string, cron: Cron, pattern: CronPattern, timezone: string | undefined, minMs: number): number {
  let first = -1;
  let last = -1;
  let gap = Infinity;
  for (let h = 0; h < 24; h++) {
    if (!pattern.hour[h]) continue;
    for (let m = 0; m < 60; m++) {
      if (!pattern.minute[m]) continue;
      for (let s = 0; s < 60; s++) {
        if (!pattern.second[s]) continue;
        const t = h * 3600 + m * 60 + s;
        if (last >= 0) gap = Math.min(gap, (t - last) * 1000);
        else first = t;
        if (gap < minMs) return gap;
        last = t;
      }
    }
  }
  if ((DAY_S - last + first) * 1000 >= minMs) return gap;
  // The last run of each matching day, then the run after it.
  const parts = (NICKNAMES[source.toLowerCase()] ?? source).split(/\s+/);
  const lastOfDay = `${last % 60} ${Math.floor(last / 60) % 60} ${Math.floor(last / 3600)} ${parts.slice(-3).join(' ')}`;
  const lastRuns = new Cron(lastOfDay, { ...(timezone === undefined ? {} : { timezone }), mode: '6-part' });
  for (const run of lastRuns.enumerate(new Date(REFERENCE))) {
    if (run.getTime() > REFERENCE + CROSS_DAY_SPAN_MS) break;
    const after = cron.nextRun(run);
    if (after) gap = Math.min(gap, after.getTime() - run.getTime());
    if (gap < minMs) break;
  }
  return gap;
}
