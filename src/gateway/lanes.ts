/** One unit of work on a lane; gets a signal that `/stop` or shutdown aborts. */
export type LaneJob = (signal: AbortSignal) => Promise<void>;

interface QueuedJob {
  run: LaneJob;
  /** Called instead of `run` when the job is dropped at shutdown. */
  cancel?: () => void;
}

interface Lane {
  key: string;
  queue: QueuedJob[];
  running?: AbortController;
}

/**
 * Per-key FIFO lanes: one job at a time per key, jobs of different keys in parallel up to
 * `maxConcurrent`. Lanes waiting for a slot are served in the order they became ready, so one busy key
 * cannot starve the others. A job that throws or is aborted never blocks its lane.
 */
export class LaneScheduler {
  private readonly lanes = new Map<string, Lane>();
  private readonly ready: Lane[] = [];
  private readonly idleWaiters: (() => void)[] = [];
  private running = 0;
  /** Jobs that gave their slot back while they wait on something else (see {@link lend}). */
  private lent = 0;
  /** Lent jobs waiting to take a slot again; served before ready lanes. */
  private readonly reclaimers: (() => void)[] = [];
  private paused = false;
  private readonly maxConcurrent: number;
  private readonly onError: (key: string, error: unknown) => void;

  constructor(options: { maxConcurrent: number; onError?: (key: string, error: unknown) => void }) {
    this.maxConcurrent = Math.max(1, options.maxConcurrent);
    this.onError = options.onError ?? (() => undefined);
  }

  /** Queues a job on its key's lane. */
  enqueue(key: string, job: LaneJob, cancel?: () => void): void {
    let lane = this.lanes.get(key);
    if (!lane) {
      lane = { key, queue: [] };
      this.lanes.set(key, lane);
    }
    lane.queue.push({ run: job, cancel });
    if (!lane.running && lane.queue.length === 1) this.ready.push(lane);
    this.pump();
  }

  /** Aborts the running job of a key. Queued jobs stay. */
  stop(key: string, reason = 'stopped'): boolean {
    const controller = this.lanes.get(key)?.running;
    if (!controller || controller.signal.aborted) return false;
    controller.abort(new Error(reason));
    return true;
  }

  isRunning(key: string): boolean {
    return Boolean(this.lanes.get(key)?.running);
  }

  /** Jobs waiting on a key's lane (not the running one). */
  depth(key: string): number {
    return this.lanes.get(key)?.queue.length ?? 0;
  }

  /** Jobs waiting on all lanes. */
  totalQueued(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.queue.length;
    return n;
  }

  get runningCount(): number {
    return this.running;
  }

  /**
   * Runs `work` with the calling job's slot given back: the slot goes to the next ready lane while `work`
   * waits (on another session, say), and is taken again, ahead of lanes that are merely ready, before this
   * returns. With `maxConcurrent: 1` a job can wait on another lane's job without deadlock.
   */
  async lend<T>(work: () => Promise<T>): Promise<T> {
    this.running--;
    this.lent++;
    this.pump();
    try {
      return await work();
    } finally {
      await new Promise<void>((resolve) => {
        this.reclaimers.push(resolve);
        this.pump();
      });
    }
  }

  /** Starts no new jobs (shutdown). Running ones go on. */
  pause(): void {
    this.paused = true;
  }

  /** Aborts every running job. */
  abortAll(reason: string): void {
    for (const lane of this.lanes.values()) lane.running?.abort(new Error(reason));
  }

  /** Drops every queued job (shutdown), calling their `cancel`. Returns how many were dropped. */
  cancelQueued(): number {
    let dropped = 0;
    for (const lane of this.lanes.values()) {
      for (const job of lane.queue.splice(0)) {
        dropped++;
        job.cancel?.();
      }
      if (!lane.running) this.lanes.delete(lane.key);
    }
    this.ready.length = 0;
    return dropped;
  }

  /** Resolves when no job runs (and, unless paused, none is queued). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return this.running === 0 && this.lent === 0 && (this.paused || this.ready.length === 0);
  }

  private pump(): void {
    while (this.reclaimers.length && this.running < this.maxConcurrent) {
      this.running++;
      this.lent--;
      (this.reclaimers.shift() as () => void)();
    }
    while (!this.paused && this.running < this.maxConcurrent && this.ready.length) {
      const lane = this.ready.shift() as Lane;
      const job = lane.queue.shift();
      if (!job) continue;
      this.start(lane, job);
    }
    if (this.isIdle()) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private start(lane: Lane, job: QueuedJob): void {
    const controller = new AbortController();
    lane.running = controller;
    this.running++;
    const finish = () => {
      lane.running = undefined;
      this.running--;
      if (lane.queue.length) this.ready.push(lane);
      else this.lanes.delete(lane.key);
      this.pump();
    };
    let result: Promise<void>;
    try {
      result = job.run(controller.signal);
    } catch (error) {
      result = Promise.reject(error);
    }
    result.catch((error: unknown) => this.onError(lane.key, error)).finally(finish);
  }
}
