import type { DeliverToConfig, JobConfig } from '../config/scheduler.ts';

/** A job as the scheduler runs it (SPEC §17): its config, where it came from, when it was made. */
export interface Job extends JobConfig {
  /** `config`: the config file (read-only at run time); `runtime`: the `schedule` tool, the CLI, the dashboard. */
  source: 'config' | 'runtime';
  /** Epoch ms it was made (runtime jobs) or first seen (config jobs). */
  createdAt: number;
  /** Who made a runtime job: `tool:<sessionKey>`, `cli`, `dashboard`, `api`. */
  createdBy?: string;
}

/** How a job's runs went. Kept in the job store, for every job. */
export interface JobState {
  jobId: string;
  /** The due time of the last run claimed (epoch ms): a due time at or before it never runs again. */
  lastDueAt?: number;
  /** When the scheduler first saw the job: a recurring job fires for due times after it (not for older slots). */
  since: number;
  /** When the last run ended, and how. */
  lastRunAt?: number;
  lastOutcome?: JobOutcome;
  /** The last run's error, one line. */
  lastError?: string;
  runs: number;
  paused?: boolean;
}

/** How one run ended: answered and delivered, answered with nothing to say, failed, or its chat could not be reached. */
export type JobOutcome = 'delivered' | 'silent' | 'failed' | 'undeliverable' | 'budget';

/**
 * Where runtime jobs and every job's state are kept (SPEC §17): a port defined here, the local implementation
 * beside it and the PostgreSQL one in `src/cluster/`; `src/main.ts` builds one and passes it in.
 */
export interface JobStore {
  /** Runtime jobs (config jobs are not stored). */
  listJobs(): Promise<Job[]>;
  /** Adds or replaces a runtime job. */
  putJob(job: Job): Promise<void>;
  /** Deletes a runtime job and its state; false when there was none. */
  removeJob(id: string): Promise<boolean>;
  /** The state of a job, made with `since: now` the first time it is asked for. */
  stateOf(id: string, now: number): Promise<JobState>;
  listStates(): Promise<JobState[]>;
  /**
   * Takes due time `dueAt` of job `id`: true for exactly one caller per (id, dueAt), across restarts and replicas
   * (cluster mode: a row lock in PostgreSQL), and only when `dueAt` is after the job's `lastDueAt`, which it becomes.
   */
  claim(id: string, dueAt: number): Promise<boolean>;
  /** Records how a run ended (`runs` + 1). */
  recordRun(id: string, run: { outcome: JobOutcome; at: number; error?: string }): Promise<void>;
  setPaused(id: string, paused: boolean): Promise<void>;
  close?(): Promise<void>;
}

/** A job with its state and next due time, as `/admin/jobs`, the CLI, the tool and the dashboard show it. */
export interface JobView {
  job: Job;
  state: JobState;
  /** Epoch ms of the next due time; undefined for a one-off that ran, or a paused or disabled job. */
  nextRunAt?: number;
}

/** What a new runtime job is made from (the tool fills `deliverTo` from the chat it was asked in). */
export interface JobInput {
  id?: string;
  schedule: string;
  timezone?: string;
  prompt: string;
  agentId?: string;
  deliverTo: DeliverToConfig;
  session?: string;
  tokenBudget?: number;
}

/** The jobs as the tool, the admin routes and the CLI use them (implemented by the scheduler). */
export interface JobsService {
  list(): Promise<JobView[]>;
  /** Checks the schedule (valid, not more often than `scheduler.minIntervalSeconds`) and the target, then stores it. */
  add(input: JobInput, createdBy: string): Promise<JobView>;
  /** Removes a runtime job; a config job cannot be removed (an error says to edit the config). */
  remove(id: string): Promise<boolean>;
  /** Runs a job now (once), whatever its schedule. Resolves when the run is queued. */
  runNow(id: string): Promise<void>;
  setPaused(id: string, paused: boolean): Promise<JobView>;
  /** Queues a heartbeat now (`POST /hooks/wake`); false when no heartbeat is configured. */
  wake(): Promise<boolean>;
}
