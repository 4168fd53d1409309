import { LaneScheduler } from './lanes.ts';

/**
 * The background side of goal runs (SPEC §11): at most `maxConcurrentBackgroundTurns` background batches
 * at once; a batch waits for its permit before it joins its session's lane, so waiting never holds a lane
 * slot.
 */
export class BackgroundRuns {
  private readonly permits: LaneScheduler;
  /** Session key → background messages of it waiting or running. */
  private readonly pending = new Map<string, number>();

  constructor(maxConcurrent: number) {
    this.permits = new LaneScheduler({ maxConcurrent });
  }

  /** True while a background message of the session waits or runs (a start-up resume is then not queued again). */
  isPending(key: string): boolean {
    return this.pending.has(key);
  }

  /** Runs `work` (the batch on its lane) once a background permit is free; resolves undefined if dropped at shutdown. */
  schedule<T>(key: string, work: () => Promise<T>): Promise<T | undefined> {
    this.pending.set(key, (this.pending.get(key) ?? 0) + 1);
    const settle = () => {
      const n = (this.pending.get(key) ?? 1) - 1;
      if (n > 0) this.pending.set(key, n);
      else this.pending.delete(key);
    };
    return new Promise<T | undefined>((resolve) => {
      this.permits.enqueue(key, async () => {
        try {
          resolve(await work());
        } finally {
          settle();
        }
      }, () => {
        settle();
        resolve(undefined);
      });
    });
  }

  /** Background batches running now. */
  get running(): number {
    return this.permits.runningCount;
  }

  /** Background batches waiting for a permit. */
  get waiting(): number {
    return this.permits.totalQueued();
  }

  /** Shutdown: starts no more batches; the waiting ones stay journaled for the next start. */
  close(): void {
    this.permits.pause();
    this.permits.cancelQueued();
  }
}
