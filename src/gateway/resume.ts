import type { Logger } from '../core/logger.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { Gateway } from './gateway.ts';

/** Spacing of start-up resumes, so a restart does not fire every interrupted run at once. */
export const RESUME_STAGGER_MS = 250;

/** True for a session a stop or crash left in the middle of work toward its goal. */
export function wasInterrupted(entry: SessionEntry): boolean {
  return Boolean(entry.goal) && (entry.runState === 'running' || entry.runState === 'continuing');
}

/**
 * At start (`backgroundExecution.autoResumeOnStartup`): queues `background_auto_resume` for every session
 * left running or continuing toward a goal, staggered, within the background limit (SPEC §11).
 */
export async function resumeInterruptedRuns(gateway: Gateway, sessions: AsyncIterable<SessionEntry>, logger: Logger, staggerMs = RESUME_STAGGER_MS): Promise<number> {
  try {
    const found: SessionEntry[] = [];
    for await (const entry of sessions) if (wasInterrupted(entry)) found.push(entry);
    if (!found.length) return 0;
    const targets = new Map(found.map((e) => [e.key, e.goalTarget ?? e.deliveryTarget]));
    const queued = gateway.resumeRuns(found.map((e) => e.key), staggerMs, (key) => targets.get(key));
    logger.info({ found: found.length, queued }, 'resuming background runs interrupted by the last stop');
    return queued;
  } catch (error) {
    logger.error({ err: error }, 'could not look for interrupted background runs');
    return 0;
  }
}
