import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Job, JobOutcome, JobState, JobStore } from './jobs.ts';

/** A `job_states` row. Times are epoch ms; `paused` is 0 or 1. */
interface StateRow {
  job_id: string;
  since: number;
  last_due_at: number | null;
  last_run_at: number | null;
  last_outcome: string | null;
  last_error: string | null;
  runs: number;
  paused: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL,
  job TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS job_states (
  job_id TEXT PRIMARY KEY,
  since INTEGER NOT NULL,
  last_due_at INTEGER,
  last_run_at INTEGER,
  last_outcome TEXT,
  last_error TEXT,
  runs INTEGER NOT NULL DEFAULT 0,
  paused INTEGER NOT NULL DEFAULT 0
);
`;

/** A state as the port gives it: unset times, outcome and error left out, `paused` only when true. */
function stateFromRow(row: StateRow): JobState {
  const state: JobState = { jobId: row.job_id, since: row.since, runs: row.runs };
  if (row.last_due_at !== null) state.lastDueAt = row.last_due_at;
  if (row.last_run_at !== null) state.lastRunAt = row.last_run_at;
  if (row.last_outcome !== null) state.lastOutcome = row.last_outcome as JobOutcome;
  if (row.last_error !== null) state.lastError = row.last_error;
  if (row.paused) state.paused = true;
  return state;
}

/** Due times are epoch ms: anything else (NaN, Infinity) would compare as nothing and claim nothing, silently. */
function checkTime(name: string, value: number): void {
  if (!Number.isFinite(value)) throw new RangeError(`${name} must be a finite epoch ms, got ${value}`);
}

/**
 * The job store of one machine (SPEC §17): `stateDir/jobs.sqlite`, runtime jobs as JSON text in `jobs`, every
 * job's state as columns in `job_states`. One connection (better-sqlite3, WAL, `synchronous=NORMAL`: a commit
 * survives a crash of the process, as the session store's do); every method is one or two statements on tiny
 * rows, run synchronously and committed before its promise settles. `claim` is a conditional `UPDATE`
 * (`last_due_at` before the due time), so a due time is taken once, restarts included. A state that a write
 * needs and that does not exist yet is made with `since` = the due time claimed, the run's time (`recordRun`) or
 * the time of the call (`setPaused`).
 */
export class SqliteJobStore implements JobStore {
  private readonly db: Database.Database;
  private readonly statements: ReturnType<typeof prepare>;

  private constructor(db: Database.Database) {
    this.db = db;
    this.statements = prepare(db);
  }

  /** Opens (creating it and its directory if needed) the job store file, e.g. `stateDir/jobs.sqlite`. */
  static open(file: string): SqliteJobStore {
    if (file !== ':memory:') mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file, { timeout: 5000 });
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.exec(SCHEMA);
      return new SqliteJobStore(db);
    } catch (error) {
      db.close();
      throw error;
    }
  }

  async listJobs(): Promise<Job[]> {
    return this.statements.listJobs.all().map((row) => JSON.parse(row.job) as Job);
  }

  async putJob(job: Job): Promise<void> {
    this.statements.putJob.run(job.id, job.createdAt, JSON.stringify(job));
  }

  /** Deletes the job and its state in one transaction; true when there was a runtime job of that id. */
  async removeJob(id: string): Promise<boolean> {
    return this.statements.removeJob(id);
  }

  async stateOf(id: string, now: number): Promise<JobState> {
    checkTime('now', now);
    const { getState, createState } = this.statements;
    const row = getState.get(id) ?? (createState.run(id, now), getState.get(id));
    if (!row) throw new Error(`the state of job ${id} could not be made`);
    return stateFromRow(row);
  }

  async listStates(): Promise<JobState[]> {
    return this.statements.listStates.all().map(stateFromRow);
  }

  async claim(id: string, dueAt: number): Promise<boolean> {
    checkTime('dueAt', dueAt);
    return this.statements.claim(id, dueAt);
  }

  async recordRun(id: string, run: { outcome: JobOutcome; at: number; error?: string }): Promise<void> {
    checkTime('at', run.at);
    this.statements.recordRun.run({ id, since: run.at, at: run.at, outcome: run.outcome, error: run.error ?? null });
  }

  async setPaused(id: string, paused: boolean): Promise<void> {
    this.statements.setPaused.run(id, Date.now(), paused ? 1 : 0);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

/** The statements of one connection, prepared once. */
function prepare(db: Database.Database) {
  const createState = db.prepare<[string, number]>('INSERT INTO job_states (job_id, since) VALUES (?, ?) ON CONFLICT (job_id) DO NOTHING');
  const deleteJob = db.prepare<[string]>('DELETE FROM jobs WHERE id = ?');
  const deleteState = db.prepare<[string]>('DELETE FROM job_states WHERE job_id = ?');
  const takeDue = db.prepare<[number, string, number]>(
    'UPDATE job_states SET last_due_at = ? WHERE job_id = ? AND (last_due_at IS NULL OR last_due_at < ?)',
  );
  return {
    listJobs: db.prepare<[], { job: string }>('SELECT job FROM jobs ORDER BY created_at, id'),
    putJob: db.prepare<[string, number, string]>(
      'INSERT INTO jobs (id, created_at, job) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, job = excluded.job',
    ),
    removeJob: db.transaction((id: string): boolean => {
      deleteState.run(id);
      return deleteJob.run(id).changes > 0;
    }),
    getState: db.prepare<[string], StateRow>('SELECT * FROM job_states WHERE job_id = ?'),
    createState,
    listStates: db.prepare<[], StateRow>('SELECT * FROM job_states ORDER BY job_id'),
    claim: db.transaction((id: string, dueAt: number): boolean => {
      createState.run(id, dueAt);
      return takeDue.run(dueAt, id, dueAt).changes === 1;
    }),
    recordRun: db.prepare<[{ id: string; since: number; at: number; outcome: string; error: string | null }]>(
      `INSERT INTO job_states (job_id, since, last_run_at, last_outcome, last_error, runs) VALUES (@id, @since, @at, @outcome, @error, 1)
       ON CONFLICT (job_id) DO UPDATE SET last_run_at = excluded.last_run_at, last_outcome = excluded.last_outcome,
         last_error = excluded.last_error, runs = runs + 1`,
    ),
    setPaused: db.prepare<[string, number, number]>(
      'INSERT INTO job_states (job_id, since, paused) VALUES (?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET paused = excluded.paused',
    ),
  };
}
