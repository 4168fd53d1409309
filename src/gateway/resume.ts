import type { Logger } from '../core/logger.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { Gateway } from './gateway.ts';

/** Spacing of start-up resumes, so a restart does not fire every interrupted run at once. */
export const RESUME_STAGGER_MS = 250;

/** True for a session a stop or crash left in the middle of work toward its goal. */
export function wasInterrupted(entry: SessionEntry): boolean {
  return Boolean(entry.goal) && (entry.runState === 'running' || entry.runState === 'continuing');
}

/** What the start-up scan does with the runs the last stop left behind. */
export interface ResumeOptions {
  /** `backgroundExecution.enabled` and `autoResumeOnStartup`: goal runs are queued again. */
  resume: boolean;
  /**
   * Ends a run left `running` that nothing resumes (no goal, or resuming off): its turn died with the last
   * process. Runs on the session's lane, so a replayed message of the session runs after it, not before.
   */
  settle(key: string): Promise<void>;
  staggerMs?: number;
}

/**
 * At start: queues `background_auto_resume` for every session left running or continuing toward a goal,
 * staggered, within the background limit (SPEC §11), when resuming is on; a session left `running` that is
 * not resumed is settled (`failed`), so it does not stay listed in `/admin/runs` for ever.
 */
export async function resumeInterruptedRuns(gateway: Gateway, sessions: AsyncIterable<SessionEntry>, logger: Logger, options: ResumeOptions): Promise<number> {
  try {
    const found: SessionEntry[] = [];
    const stale: string[] = [];
    for await (const entry of sessions) {
      if (options.resume && wasInterrupted(entry)) found.push(entry);
      else if (entry.runState === 'running') stale.push(entry.key);
    }
    for (const key of stale) {
      void options.settle(key).catch((err: unknown) => logger.warn({ err, sessionKey: key }, 'could not settle a run the last stop left running'));
    }
    if (stale.length) logger.info({ sessions: stale.length }, 'runs the last stop left running, with nothing to resume them, are marked failed');
    if (!found.length) return 0;
    const targets = new Map(found.map((e) => [e.key, e.goalTarget ?? e.deliveryTarget]));
    const queued = gateway.resumeRuns(found.map((e) => e.key), options.staggerMs ?? RESUME_STAGGER_MS, (key) => targets.get(key));
    logger.info({ found: found.length, queued }, 'resuming background runs interrupted by the last stop');
    return queued;
  } catch (error) {
    logger.error({ err: error }, 'could not look for interrupted background runs');
    return 0;
  }
}
