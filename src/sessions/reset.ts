import type { ResetPolicyPatch, SessionConfig } from '../config/schema.ts';
import type { ChatType } from '../core/message.ts';

/** The reset policy that applies to one session. */
export interface ResetPolicy {
  mode: 'daily' | 'idle' | 'off';
  atHour: number;
  /** 0 = no idle expiry. With mode `daily` and idleMinutes > 0, the first to expire wins. */
  idleMinutes: number;
  /** IANA zone of the daily boundary; undefined = the host's. */
  timezone?: string;
}

/** Why a session went stale. */
export type ResetReason = 'daily' | 'idle';

const BASE: ResetPolicy = { mode: 'daily', atHour: 4, idleMinutes: 0 };

/** What decides a session's policy. */
export interface ResetScope {
  channel: string;
  chatType: ChatType;
  isThread: boolean;
  /** Per-session `/timezone` override. */
  timezone?: string;
}

/**
 * The effective policy (SPEC §3): `resetByType` is merged over `reset`; `resetByChannel.<channel>`
 * replaces both (merged over the built-in defaults only). A session's own time zone wins over all.
 */
export function resolveResetPolicy(config: Pick<SessionConfig, 'reset' | 'resetByType' | 'resetByChannel'>, scope: ResetScope): ResetPolicy {
  const byChannel = config.resetByChannel[scope.channel];
  let policy: ResetPolicy;
  if (byChannel) {
    policy = merge(BASE, byChannel);
  } else {
    const type = scope.isThread ? 'thread' : scope.chatType === 'direct' ? 'direct' : 'group';
    policy = merge(merge(BASE, config.reset), config.resetByType[type]);
  }
  if (scope.timezone) policy = { ...policy, timezone: scope.timezone };
  return policy;
}

function merge(base: ResetPolicy, patch: ResetPolicyPatch | undefined): ResetPolicy {
  if (!patch) return base;
  const out: ResetPolicy = { ...base };
  if (patch.mode !== undefined) out.mode = patch.mode;
  if (patch.atHour !== undefined) out.atHour = patch.atHour;
  if (patch.idleMinutes !== undefined) out.idleMinutes = patch.idleMinutes;
  if (patch.timezone !== undefined) out.timezone = patch.timezone;
  return out;
}

/**
 * Decides whether a session whose last activity was at `lastActivity` is stale at `now`.
 * Returns the reason, or undefined when the session goes on.
 */
export function evaluateReset(policy: ResetPolicy, lastActivity: number, now: number): ResetReason | undefined {
  if (policy.mode === 'off') return undefined;
  const idleMs = policy.idleMinutes > 0 ? policy.idleMinutes * 60_000 : 0;
  const idleStale = idleMs > 0 && now - lastActivity > idleMs;
  if (policy.mode === 'idle') return idleStale ? 'idle' : undefined;
  const boundary = lastDailyBoundary(now, policy.atHour, policy.timezone);
  const dailyStale = lastActivity < boundary;
  if (dailyStale && idleStale) {
    // Both expired: the one that expired first wins.
    return lastActivity + idleMs <= boundary ? 'idle' : 'daily';
  }
  if (dailyStale) return 'daily';
  if (idleStale) return 'idle';
  return undefined;
}

/** When a session idle since `lastActivity` expires under `policy` (Infinity when never). */
export function expiresAt(policy: ResetPolicy, lastActivity: number): number {
  if (policy.mode === 'off') return Infinity;
  const idle = policy.idleMinutes > 0 ? lastActivity + policy.idleMinutes * 60_000 : Infinity;
  if (policy.mode === 'idle') return idle;
  return Math.min(idle, nextDailyBoundary(lastActivity, policy.atHour, policy.timezone));
}

const boundaryCache = new Map<string, { from: number; until: number }>();

/** The most recent instant at or before `now` when the wall clock of `timeZone` read `atHour:00`. */
export function lastDailyBoundary(now: number, atHour: number, timeZone?: string): number {
  // Every message asks this; the answer holds for a whole day, so remember the current day's window.
  const key = `${timeZone ?? ''}\u0000${atHour}`;
  const cached = boundaryCache.get(key);
  if (cached && now >= cached.from && now < cached.until) return cached.from;
  const from = computeLastDailyBoundary(now, atHour, timeZone);
  if (boundaryCache.size > 256) boundaryCache.clear();
  boundaryCache.set(key, { from, until: nextDailyBoundary(from, atHour, timeZone) });
  return from;
}

function computeLastDailyBoundary(now: number, atHour: number, timeZone?: string): number {
  const local = wallClock(now, timeZone);
  let candidate = zonedTime(local.year, local.month, local.day, atHour, timeZone);
  if (candidate > now) {
    const prev = wallClock(now - 86_400_000, timeZone);
    candidate = zonedTime(prev.year, prev.month, prev.day, atHour, timeZone);
  }
  return candidate;
}

/** The first instant after `t` when the wall clock of `timeZone` reads `atHour:00`. */
export function nextDailyBoundary(t: number, atHour: number, timeZone?: string): number {
  const local = wallClock(t, timeZone);
  let candidate = zonedTime(local.year, local.month, local.day, atHour, timeZone);
  if (candidate <= t) {
    const next = wallClock(t + 86_400_000, timeZone);
    candidate = zonedTime(next.year, next.month, next.day, atHour, timeZone);
  }
  return candidate;
}

interface WallClock { year: number; month: number; day: number; hour: number; minute: number; second: number }

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string | undefined): Intl.DateTimeFormat {
  const id = timeZone ?? '';
  let f = formatters.get(id);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
    });
    formatters.set(id, f);
  }
  return f;
}

/** The wall clock reading of `timeZone` at instant `t`. */
export function wallClock(t: number, timeZone?: string): WallClock {
  const parts: Record<string, number> = {};
  for (const p of formatterFor(timeZone).formatToParts(new Date(t))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  return { year: parts.year!, month: parts.month!, day: parts.day!, hour: parts.hour! % 24, minute: parts.minute!, second: parts.second! };
}

function offsetAt(t: number, timeZone?: string): number {
  const w = wallClock(t, timeZone);
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  return asUtc - Math.floor(t / 1000) * 1000;
}

/**
 * The instant when `timeZone`'s wall clock reads the given local time. In a DST gap (the hour does not
 * exist) it is the first instant after the gap; in a fold (the hour exists twice) the earlier one.
 */
export function zonedTime(year: number, month: number, day: number, hour: number, timeZone?: string): number {
  const naive = Date.UTC(year, month - 1, day, hour);
  const offsets = new Set([offsetAt(naive - 86_400_000, timeZone), offsetAt(naive, timeZone), offsetAt(naive + 86_400_000, timeZone)]);
  const matches: number[] = [];
  for (const offset of offsets) {
    const t = naive - offset;
    const w = wallClock(t, timeZone);
    if (w.year === year && w.month === month && w.day === day && w.hour === hour && w.minute === 0) matches.push(t);
  }
  if (matches.length) return Math.min(...matches);
  // In a gap: the wall clock jumps over `hour`; the boundary is the instant of the jump.
  const candidates = [...offsets].map((o) => naive - o).sort((a, b) => a - b);
  return candidates[candidates.length - 1] ?? naive;
}
