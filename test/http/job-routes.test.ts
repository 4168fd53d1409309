import { describe, expect, it } from 'vitest';
import { GatewayMetrics } from '../../src/accounting/metrics.ts';
import { buildStatusReport, jobsReport, RECENT_JOB_RUNS } from '../../src/accounting/status-report.ts';
import { ProviderTracker } from '../../src/accounting/provider-tracker.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { jobViewJson, mountJobRoutes } from '../../src/http/job-routes.ts';
import { FakeJobs } from './fake-jobs.ts';
import { parsePrometheus } from './prometheus.ts';

const TOKEN = 'gateway-token-abc';
const H = Date.parse('2026-12-02T07:00:00Z');

/** `/admin/jobs` against a fake scheduler: CRUD, the scheduler's errors passed through, the gateway's auth. */
describe('/admin/jobs', () => {
  const setup = () => {
    const jobs = new FakeJobs();
    const app = createHttpApp({ authToken: TOKEN, maxBodyBytes: 1_000_000, logger: silentLogger(), channelRoutes: [], mounts: [mountJobRoutes({ jobs })] });
    const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const response = await app.request(path, {
        method, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers }, ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, body: await response.json() };
    };
    return { jobs, app, call };
  };
  const input = { schedule: '0 8 * * *', prompt: 'Summarize the news', deliverTo: { channel: 'telegram', peer: '42' }, timezone: 'Europe/Berlin' };

  it('needs the gateway token', async () => {
    const { app } = setup();
    expect((await app.request('/admin/jobs')).status).toBe(401);
    expect((await app.request('/admin/jobs', { method: 'POST', body: '{}', headers: { authorization: 'Bearer nope' } })).status).toBe(401);
  });

  it('lists jobs with their times as ISO strings', async () => {
    const { jobs, call } = setup();
    jobs.seed({ id: 'news' }, { lastRunAt: H - 60_000, lastOutcome: 'delivered', lastDueAt: H - 120_000, runs: 3 });
    const { status, body } = await call('GET', '/admin/jobs');
    expect(status).toBe(200);
    expect(body.jobs).toEqual([{
      job: expect.objectContaining({ id: 'news', schedule: '0 8 * * *', source: 'config', createdAt: '2026-12-02T07:00:00.000Z' }),
      state: { jobId: 'news', since: '2026-12-02T07:00:00.000Z', lastRunAt: '2026-12-02T06:59:00.000Z', lastDueAt: '2026-12-02T06:58:00.000Z', lastOutcome: 'delivered', runs: 3 },
      nextRunAt: '2026-12-02T08:00:00.000Z',
    }]);
  });

  it('adds a job (201, made by the client the header names, else api), removes it, and says 404 for an unknown one', async () => {
    const { jobs, call } = setup();
    const added = await call('POST', '/admin/jobs', { ...input, id: 'daily-news' }, { 'x-switchboard-client': 'cli' });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ job: { id: 'daily-news', source: 'runtime', createdBy: 'cli', timezone: 'Europe/Berlin' }, nextRunAt: '2026-12-02T08:00:00.000Z' });
    expect(jobs.calls[0]).toEqual({ op: 'add', createdBy: 'cli', input: { ...input, id: 'daily-news', deliverTo: { channel: 'telegram', accountId: 'default', peer: '42' } } });
    expect((await call('POST', '/admin/jobs', input, { 'x-switchboard-client': 'evil' })).body.job.createdBy).toBe('api');
    expect((await call('GET', '/admin/jobs')).body.jobs.map((j: any) => j.job.id)).toEqual(['daily-news', 'job-1']);
    expect(await call('DELETE', '/admin/jobs/daily-news')).toEqual({ status: 200, body: { removed: true, id: 'daily-news' } });
    expect(await call('DELETE', '/admin/jobs/daily-news')).toMatchObject({ status: 404, body: { error: { code: 'job_not_found' } } });
    expect(await call('DELETE', '/admin/jobs/..%2Fx')).toMatchObject({ status: 404, body: { error: { code: 'job_not_found' } } });
  });

  it('passes the scheduler\'s errors through with their status and code', async () => {
    const { jobs, call } = setup();
    jobs.seed({ id: 'from-config' });
    expect(await call('POST', '/admin/jobs', { ...input, schedule: 'bad' })).toMatchObject({ status: 400, body: { error: { code: 'schedule_invalid', message: expect.stringContaining('not a cron expression') } } });
    expect(await call('POST', '/admin/jobs', { ...input, schedule: '* * * * * *' })).toMatchObject({ status: 400, body: { error: { code: 'schedule_too_frequent', message: expect.stringContaining('minIntervalSeconds') } } });
    expect(await call('POST', '/admin/jobs', { ...input, id: 'from-config' })).toMatchObject({ status: 409, body: { error: { code: 'job_exists' } } });
    expect(await call('DELETE', '/admin/jobs/from-config')).toMatchObject({ status: 400, body: { error: { code: 'job_from_config' } } });
    expect(await call('POST', '/admin/jobs/nope/run', {})).toMatchObject({ status: 404, body: { error: { code: 'job_not_found' } } });
  });

  it('refuses bad job bodies with 400 before the scheduler sees them', async () => {
    const { jobs, call } = setup();
    const bad: [unknown, string][] = [
      [{ ...input, schedule: undefined }, 'missing_field'],
      [{ ...input, deliverTo: { channel: 'telegram' } }, 'invalid_field'],
      [{ ...input, deliverTo: { channel: 'irc', peer: '1' } }, 'invalid_field'],
      [{ ...input, id: 'has space' }, 'invalid_field'],
      [{ ...input, tokenBudget: -1 }, 'invalid_field'],
      [{ ...input, colour: 'red' }, 'unknown_field'],
      ['just a string', 'invalid_body'],
    ];
    for (const [body, code] of bad) {
      expect(await call('POST', '/admin/jobs', body), JSON.stringify(body)).toMatchObject({ status: 400, body: { error: { code } } });
    }
    expect(jobs.calls).toEqual([]);
  });

  it('runs a job now (202), pauses and resumes it', async () => {
    const { jobs, call } = setup();
    jobs.seed({ id: 'news' });
    expect(await call('POST', '/admin/jobs/news/run', {})).toEqual({ status: 202, body: { queued: true, id: 'news' } });
    const paused = await call('POST', '/admin/jobs/news/pause', {});
    expect(paused.status).toBe(200);
    expect(paused.body.state.paused).toBe(true);
    expect(paused.body.nextRunAt).toBeUndefined();
    const resumed = await call('POST', '/admin/jobs/news/resume', {});
    expect(resumed.body).toMatchObject({ state: { paused: false }, nextRunAt: '2026-12-02T08:00:00.000Z' });
    expect(jobs.calls).toEqual([{ op: 'run', id: 'news' }, { op: 'pause', id: 'news', paused: true }, { op: 'pause', id: 'news', paused: false }]);
  });
});

describe('jobs on /status and /metrics', () => {
  it('the status report counts jobs and paused ones, names the soonest next run and the latest runs newest first', async () => {
    const jobs = new FakeJobs();
    jobs.seed({ id: 'a' }, { lastRunAt: H - 3_000, lastOutcome: 'failed' }, H + 7_200_000);
    jobs.seed({ id: 'b' }, { lastRunAt: H - 1_000, lastOutcome: 'delivered' }, H + 600_000);
    jobs.seed({ id: 'c' }, { paused: true }, null);
    const report = await buildStatusReport({
      version: '1', startedAt: H, now: () => H, channels: () => [], activeSessions: () => 0, persistedSessions: async () => 0,
      providers: [], tracker: new ProviderTracker(), queue: () => ({ running: 0, queued: 0 }), jobs: () => jobs.list(),
    });
    expect(report.jobs).toEqual({
      count: 3, paused: 1, nextRunAt: '2026-12-02T07:10:00.000Z',
      recent: [{ jobId: 'b', at: '2026-12-02T06:59:59.000Z', outcome: 'delivered' }, { jobId: 'a', at: '2026-12-02T06:59:57.000Z', outcome: 'failed' }],
    });
    const failing = await buildStatusReport({
      version: '1', startedAt: H, now: () => H, channels: () => [], activeSessions: () => 0, persistedSessions: async () => 0,
      providers: [], tracker: new ProviderTracker(), queue: () => ({ running: 0, queued: 0 }), jobs: async () => { throw new Error('store down'); },
    });
    expect(failing.jobs).toEqual({ count: 0, paused: 0, recent: [], error: 'store down' });
  });

  it('lists at most RECENT_JOB_RUNS recent runs and no next run when nothing is due', () => {
    const jobs = new FakeJobs();
    for (let i = 0; i < RECENT_JOB_RUNS + 5; i++) jobs.seed({ id: `j${i}` }, { lastRunAt: H + i, lastOutcome: 'silent' }, null);
    const report = jobsReport([...jobs.views.values()]);
    expect(report.recent).toHaveLength(RECENT_JOB_RUNS);
    expect(report.recent[0]!.jobId).toBe(`j${RECENT_JOB_RUNS + 4}`);
    expect(report.nextRunAt).toBeUndefined();
  });

  it('/metrics counts job runs by outcome from the scheduler\'s source', async () => {
    const runs: Record<string, number> = { delivered: 2 };
    const metrics = new GatewayMetrics({ activeSessions: () => 0, evictions: () => 0, queueDepth: () => 0, runningTurns: () => 0, messages: () => ({}), jobRuns: () => runs });
    const read = async () => parsePrometheus(await metrics.registry.metrics()).samples.filter((s) => s.name === 'switchboard_job_runs_total');
    expect(await read()).toEqual([{ name: 'switchboard_job_runs_total', labels: { outcome: 'delivered' }, value: 2 }]);
    runs.delivered = 3;
    runs.failed = 1;
    expect(await read()).toEqual([
      { name: 'switchboard_job_runs_total', labels: { outcome: 'delivered' }, value: 3 },
      { name: 'switchboard_job_runs_total', labels: { outcome: 'failed' }, value: 1 },
    ]);
    expect(parsePrometheus(await metrics.registry.metrics()).types.get('switchboard_job_runs_total')).toBe('counter');
  });

  it('jobViewJson leaves absent times absent', () => {
    const jobs = new FakeJobs();
    const json = jobViewJson(jobs.seed({ id: 'x' }, {}, null));
    expect(json.nextRunAt).toBeUndefined();
    expect('lastRunAt' in json.state).toBe(false);
  });
});
