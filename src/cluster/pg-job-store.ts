import type pg from 'pg';
import type { Job, JobOutcome, JobState, JobStore } from '../scheduler/jobs.ts';
import { jsonbText, storableString } from './jsonb.ts';

/** Options of {@link PgJobStore}. */
export interface PgJobStoreOptions {
  /** The shared pool of the cluster database (not ended by the store). */
  pool: pg.Pool;
}

/** An `sb_job_state` row (`runs` is a bigint: a string). */
interface StateRow {
  job_id: string;
  since: Date;
  last_due_at: Date | null;
  last_run_at: Date | null;
  last_outcome: string | null;
  last_error: string | null;
  runs: string;
  paused: boolean;
}

const STATE_COLUMNS = 'job_id, since, last_due_at, last_run_at, last_outcome, last_error, runs, paused';

/** A state as the port gives it: unset times, outcome and error left out, `paused` only when true. */
function stateFromRow(row: StateRow): JobState {
  const state: JobState = { jobId: row.job_id, since: row.since.getTime(), runs: Number(row.runs) };
  if (row.last_due_at) state.lastDueAt = row.last_due_at.getTime();
  if (row.last_run_at) state.lastRunAt = row.last_run_at.getTime();
  if (row.last_outcome !== null) state.lastOutcome = row.last_outcome as JobOutcome;
  if (row.last_error !== null) state.lastError = row.last_error;
  if (row.paused) state.paused = true;
  return state;
}

/** An epoch ms as a timestamptz parameter; NaN or Infinity would claim nothing (or fail in pg), so it is refused here. */
function timestamp(name: string, value: number): Date {
  if (!Number.isFinite(value)) throw new RangeError(`${name} must be a finite epoch ms, got ${value}`);
  return new Date(value);
}

/**
 * The job store of cluster mode (SPEC §13, §17), migration `005-jobs`: runtime jobs as jsonb in `sb_job`, every
 * job's state as columns in `sb_job_state` (times as timestamptz, read back as epoch ms), shared by all replicas.
 * `claim` is one statement, an upsert whose update is conditional (`last_due_at` before the due time): PostgreSQL
 * locks the row and checks the condition against its latest committed version, so of replicas claiming the same
 * due time at once exactly one gets the row back, and a due time at or before the last claimed one never again.
 * A state that a write needs and that does not exist yet is made with `since` = the due time claimed, the run's
 * time (`recordRun`) or the time of the call (`setPaused`).
 */
export class PgJobStore implements JobStore {
  private readonly pool: pg.Pool;

  constructor(options: PgJobStoreOptions) {
    this.pool = options.pool;
  }

  async listJobs(): Promise<Job[]> {
    const { rows } = await this.pool.query<{ job: Job }>('SELECT job FROM sb_job ORDER BY created_at, job_id COLLATE "C"');
    return rows.map((row) => row.job);
  }

  async putJob(job: Job): Promise<void> {
    await this.pool.query(
      `INSERT INTO sb_job (job_id, created_at, job) VALUES ($1, $2, $3::jsonb)
       ON CONFLICT (job_id) DO UPDATE SET created_at = EXCLUDED.created_at, job = EXCLUDED.job`,
      [job.id, timestamp('createdAt', job.createdAt), jsonbText(job)],
    );
  }

  /** Deletes the job and its state in one statement; true when there was a runtime job of that id. */
  async removeJob(id: string): Promise<boolean> {
    const { rows } = await this.pool.query<{ n: number }>(
      `WITH s AS (DELETE FROM sb_job_state WHERE job_id = $1), j AS (DELETE FROM sb_job WHERE job_id = $1 RETURNING 1)
       SELECT count(*)::int AS n FROM j`,
      [id],
    );
    return (rows[0]?.n ?? 0) > 0;
  }

  /** One query when the state exists; else an insert (a replica making it at the same time: read again). */
  async stateOf(id: string, now: number): Promise<JobState> {
    const since = timestamp('now', now);
    const select = `SELECT ${STATE_COLUMNS} FROM sb_job_state WHERE job_id = $1`;
    const found = await this.pool.query<StateRow>(select, [id]);
    if (found.rows[0]) return stateFromRow(found.rows[0]);
    const made = await this.pool.query<StateRow>(
      `INSERT INTO sb_job_state (job_id, since) VALUES ($1, $2) ON CONFLICT (job_id) DO NOTHING RETURNING ${STATE_COLUMNS}`,
      [id, since],
    );
    const row = made.rows[0] ?? (await this.pool.query<StateRow>(select, [id])).rows[0];
    if (!row) throw new Error(`the state of job ${id} could not be made`);
    return stateFromRow(row);
  }

  async listStates(): Promise<JobState[]> {
    const { rows } = await this.pool.query<StateRow>(`SELECT ${STATE_COLUMNS} FROM sb_job_state ORDER BY job_id COLLATE "C"`);
    return rows.map(stateFromRow);
  }

  /**
   * Inserts the state with `last_due_at` = the due time, or (it exists) sets it when the stored one is earlier or
   * unset; a row comes back only when this call took the due time.
   */
  async claim(id: string, dueAt: number): Promise<boolean> {
    const due = timestamp('dueAt', dueAt);
    const { rowCount } = await this.pool.query(
      `INSERT INTO sb_job_state AS s (job_id, since, last_due_at) VALUES ($1, $2, $3)
       ON CONFLICT (job_id) DO UPDATE SET last_due_at = EXCLUDED.last_due_at
       WHERE s.last_due_at IS NULL OR s.last_due_at < EXCLUDED.last_due_at
       RETURNING 1`,
      [id, due, due],
    );
    return rowCount === 1;
  }

  async recordRun(id: string, run: { outcome: JobOutcome; at: number; error?: string }): Promise<void> {
    const at = timestamp('at', run.at);
    await this.pool.query(
      `INSERT INTO sb_job_state AS s (job_id, since, last_run_at, last_outcome, last_error, runs) VALUES ($1, $2, $3, $4, $5, 1)
       ON CONFLICT (job_id) DO UPDATE SET last_run_at = EXCLUDED.last_run_at, last_outcome = EXCLUDED.last_outcome,
         last_error = EXCLUDED.last_error, runs = s.runs + 1`,
      [id, at, at, run.outcome, run.error === undefined ? null : storableString(run.error)],
    );
  }

  async setPaused(id: string, paused: boolean): Promise<void> {
    await this.pool.query(
      `INSERT INTO sb_job_state (job_id, since, paused) VALUES ($1, $2, $3)
       ON CONFLICT (job_id) DO UPDATE SET paused = EXCLUDED.paused`,
      [id, new Date(), paused],
    );
  }
}
