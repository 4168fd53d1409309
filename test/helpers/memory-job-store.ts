import type { Job, JobOutcome, JobState, JobStore } from '../../src/scheduler/jobs.ts';

/** A job store in memory (tests of the scheduler; the real stores have their own tests). */
export class MemoryJobStore implements JobStore {
  readonly jobs = new Map<string, Job>();
  readonly states = new Map<string, JobState>();
  async listJobs(): Promise<Job[]> { return [...this.jobs.values()]; }
  async putJob(job: Job): Promise<void> { this.jobs.set(job.id, job); }
  async removeJob(id: string): Promise<boolean> { this.states.delete(id); return this.jobs.delete(id); }
  async stateOf(id: string, now: number): Promise<JobState> {
    let state = this.states.get(id);
    if (!state) this.states.set(id, state = { jobId: id, since: now, runs: 0 });
    return { ...state };
  }
  async listStates(): Promise<JobState[]> { return [...this.states.values()]; }
  async claim(id: string, dueAt: number): Promise<boolean> {
    const state = this.states.get(id) ?? { jobId: id, since: dueAt, runs: 0 };
    if (state.lastDueAt !== undefined && state.lastDueAt >= dueAt) return false;
    this.states.set(id, { ...state, lastDueAt: dueAt });
    return true;
  }
  async recordRun(id: string, run: { outcome: JobOutcome; at: number; error?: string }): Promise<void> {
    const state = this.states.get(id);
    if (state) this.states.set(id, { ...state, runs: state.runs + 1, lastRunAt: run.at, lastOutcome: run.outcome, ...(run.error ? { lastError: run.error } : {}) });
  }
  async setPaused(id: string, paused: boolean): Promise<void> {
    const state = this.states.get(id);
    if (state) this.states.set(id, { ...state, paused });
  }
}
