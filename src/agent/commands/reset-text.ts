import type { ResetPolicy, ResetReason } from '../../sessions/reset.ts';

let cachedHostZone: string | undefined;

/** The host's IANA time zone (resolved once: asking Intl costs more than a whole turn's routing). */
export function hostZone(): string {
  cachedHostZone ??= new Intl.DateTimeFormat().resolvedOptions().timeZone;
  return cachedHostZone;
}

function formatMinutes(minutes: number): string {
  if (minutes % 1440 === 0) return `${minutes / 1440} day${minutes === 1440 ? '' : 's'}`;
  if (minutes % 60 === 0) return `${minutes / 60} hour${minutes === 60 ? '' : 's'}`;
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}

function dailyTime(policy: ResetPolicy): string {
  return `${String(policy.atHour).padStart(2, '0')}:00 ${policy.timezone ?? hostZone()}`;
}

/** A reset policy in words, for /status and /timezone. */
export function describeResetPolicy(policy: ResetPolicy): string {
  if (policy.mode === 'off') return 'off';
  const idle = policy.idleMinutes > 0 ? `idle after ${formatMinutes(policy.idleMinutes)}` : '';
  if (policy.mode === 'idle') return idle || 'idle (no limit set)';
  return idle ? `daily at ${dailyTime(policy)}, or ${idle}` : `daily at ${dailyTime(policy)}`;
}

/** The one line shown before the reply after an automatic reset. */
export function resetNotice(reason: ResetReason, policy: ResetPolicy): string {
  return reason === 'idle'
    ? `↻ New session: the last one was idle for more than ${formatMinutes(policy.idleMinutes)}.`
    : `↻ New session: daily reset at ${dailyTime(policy)}.`;
}
