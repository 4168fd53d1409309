import { SwitchboardError, NotFoundError, BadRequestError } from '../../src/core/errors.ts';
import type { Job, JobInput, JobsService, JobState, JobView } from '../../src/scheduler/jobs.ts';

/** The scheduler's schedule error as the routes see it (status 400, code SCHEDULE_INVALID / SCHEDULE_TOO_FREQUENT). */
export class FakeScheduleError extends SwitchboardError {
  constructor(code: 'SCHEDULE_INVALID' | 'SCHEDULE_TOO_FREQUENT', message: string) {
    super(code, message, { status: 400 });
  }
}

/** A call the fake recorded. */
export type FakeJobsCall = { op: 'add'; input: JobInput; createdBy: string } | { op: 'remove' | 'run'; id: string } | { op: 'pause'; id: string; paused: boolean } | { op: 'wake' };

/**
 * A small in-memory {@link JobsService} for the route, CLI and dashboard tests: schedules `bad` and `* * * * * *`
 * are refused like the scheduler refuses them; each job's next run is `now + 1 h`; `heartbeat` says whether
 * `wake` has one to queue.
 */
export class FakeJobs implements JobsService {
  readonly views = new Map<string, JobView>();
  readonly calls: FakeJobsCall[] = [];
  heartbeat = true;
  now = Date.parse('2026-12-02T07:00:00Z');
  private seq = 0;

  /** Adds a job as if it came from the config (not removable) or ran before; `nextRunAt` null: nothing due. */
  seed(job: Partial<Job> & { id: string }, state: Partial<JobState> = {}, nextRunAt: number | null = this.now + 3_600_000): JobView {
    const view: JobView = {
      job: {
        schedule: '0 8 * * *', prompt: 'p', deliverTo: { channel: 'telegram', accountId: 'default', peer: '42' }, session: 'isolated', tokenBudget: 50_000,
        enabled: true, source: 'config', createdAt: this.now, ...job,
      },
      state: { jobId: job.id, since: this.now, runs: 0, ...state },
      ...(nextRunAt !== null ? { nextRunAt } : {}),
    };
    this.views.set(job.id, view);
    return view;
  }

  async list(): Promise<JobView[]> {
    return [...this.views.values()];
  }

  async add(input: JobInput, createdBy: string): Promise<JobView> {
    this.calls.push({ op: 'add', input, createdBy });
    if (input.schedule === 'bad') throw new FakeScheduleError('SCHEDULE_INVALID', 'Schedule "bad" is not a cron expression, "every <n><s|m|h|d>" or an ISO time.');
    if (input.schedule === '* * * * * *') throw new FakeScheduleError('SCHEDULE_TOO_FREQUENT', 'Schedule "* * * * * *" fires every 1 s; scheduler.minIntervalSeconds is 60.');
    const id = input.id ?? `job-${++this.seq}`;
    if (this.views.has(id)) throw new SwitchboardError('JOB_EXISTS', `A job "${id}" exists already.`, { status: 409 });
    return this.seed({ ...input, id, source: 'runtime', createdBy, session: input.session ?? 'isolated', tokenBudget: input.tokenBudget ?? 50_000 });
  }

  async remove(id: string): Promise<boolean> {
    this.calls.push({ op: 'remove', id });
    const view = this.views.get(id);
    if (view?.job.source === 'config') throw new BadRequestError(`Job "${id}" comes from the config file; remove it there.`, 'JOB_FROM_CONFIG');
    return this.views.delete(id);
  }

  async runNow(id: string): Promise<void> {
    this.calls.push({ op: 'run', id });
    if (!this.views.has(id)) throw new NotFoundError(`No job "${id}".`, 'JOB_NOT_FOUND');
  }

  async setPaused(id: string, paused: boolean): Promise<JobView> {
    this.calls.push({ op: 'pause', id, paused });
    const view = this.views.get(id);
    if (!view) throw new NotFoundError(`No job "${id}".`, 'JOB_NOT_FOUND');
    view.state = { ...view.state, paused };
    if (paused) delete view.nextRunAt;
    else view.nextRunAt = this.now + 3_600_000;
    return view;
  }

  async wake(): Promise<boolean> {
    this.calls.push({ op: 'wake' });
    return this.heartbeat;
  }
}
