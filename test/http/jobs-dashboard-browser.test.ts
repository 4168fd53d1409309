import type { ServerType } from '@hono/node-server';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobsReport, type StatusReport } from '../../src/accounting/status-report.ts';
import { TurnEvents } from '../../src/agent/turn-events.ts';
import { systemClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { createDashboardAuth } from '../../src/http/dashboard-auth.ts';
import { DashboardEvents } from '../../src/http/dashboard-events.ts';
import { mountDashboard } from '../../src/http/dashboard.ts';
import { mountJobRoutes } from '../../src/http/job-routes.ts';
import { closeGracefully, listen } from '../../src/http/serve.ts';
import { CHROMIUM, hasChromium } from '../dashboard/browser-harness.ts';
import { tempDir } from '../helpers/gateway.ts';
import { FakeJobs } from './fake-jobs.ts';

if (!hasChromium) console.log(`jobs dashboard test skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);

const poll = <T>(read: () => Promise<T> | T) => expect.poll(read, { timeout: 15_000 });

/**
 * The Jobs table of the dashboard's Runs view, in Chromium, over `/admin/jobs` of a fake scheduler: each job's
 * schedule, next run, last run and outcome; "Run now…" (confirmed) and Pause / Resume call the admin routes and
 * the table follows; a job that ran elsewhere shows up through the live `/status` stream.
 */
describe.skipIf(!hasChromium)('the dashboard\'s jobs in Chromium', { timeout: 60_000 }, () => {
  const tmp = tempDir('switchboard-jobs-dashboard-');
  const jobs = new FakeJobs();
  let server: ServerType;
  let url: string;
  let browser: Browser;
  let live: DashboardEvents;

  beforeAll(async () => {
    jobs.now = Date.now();
    jobs.seed({ id: 'morning-news', timezone: 'Europe/Berlin' }, { lastRunAt: jobs.now - 60_000, lastOutcome: 'delivered', runs: 4 });
    jobs.seed({ id: 'reminder', schedule: 'every 30m' }, { lastRunAt: jobs.now - 120_000, lastOutcome: 'failed', lastError: 'provider down', runs: 1 });
    const status = async (): Promise<StatusReport> => ({
      version: 'test', uptimeSeconds: 1, channels: [], sessions: { active: 0, persisted: 0 }, providers: [], queue: { running: 0, queued: 0 }, mcp: [],
      jobs: jobsReport(await jobs.list()),
    });
    live = new DashboardEvents({
      events: new TurnEvents(silentLogger()), status, activeSessions: () => [], pairing: async () => ({ pending: [], paired: [] }),
      version: 'test', startedAt: Date.now(), logger: silentLogger(), tickMs: 200,
    });
    const app = createHttpApp({
      authToken: '', host: '127.0.0.1', maxBodyBytes: 100_000, logger: silentLogger(), channelRoutes: [],
      mounts: [
        (a) => {
          a.get('/status', async (c) => c.json(await status()));
          a.get('/admin/runs', (c) => c.json({ runs: [] }));
          a.get('/v1/models', (c) => c.json({ object: 'list', data: [] }));
        },
        mountJobRoutes({ jobs }),
        mountDashboard({ auth: createDashboardAuth({ token: '', stateDir: tmp.dir, clock: systemClock }), live }),
      ],
    });
    const listening = await listen(app.fetch, '127.0.0.1', 0);
    server = listening.server;
    url = `http://127.0.0.1:${listening.port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    live?.close();
    if (server) await closeGracefully(server, 100);
    tmp.remove();
  });

  const row = (p: Page, id: string) => p.locator('#jobs tr', { has: p.locator(`[data-job="${id}"]`) });

  it('lists the jobs; run now, pause and resume call /admin/jobs and the table follows; a run elsewhere shows up live', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const p = await context.newPage();
    const errors: string[] = [];
    p.on('console', (m) => { if (m.type() === 'error') errors.push(`${m.text()} (${m.location().url})`); });
    p.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    await p.goto(`${url}/#/runs`);
    await row(p, 'morning-news').waitFor();
    const news = row(p, 'morning-news');
    await poll(() => news.textContent()).toContain('0 8 * * * (Europe/Berlin)');
    expect(await news.locator('[data-outcome]').textContent()).toBe('delivered');
    expect(await row(p, 'reminder').locator('[data-outcome]').textContent()).toBe('failed');
    expect(await news.locator('[data-state]').textContent()).toBe('active');

    await news.getByRole('button', { name: 'Run now…' }).click();
    await p.getByRole('dialog').getByRole('button', { name: 'Run now' }).click();
    await poll(() => p.locator('#toast').textContent()).toBe('Queued a run of morning-news.');
    expect(jobs.calls.at(-1)).toEqual({ op: 'run', id: 'morning-news' });

    await news.getByRole('button', { name: 'Pause' }).click();
    await poll(() => news.locator('[data-state]').textContent()).toBe('paused');
    expect(jobs.calls.at(-1)).toEqual({ op: 'pause', id: 'morning-news', paused: true });
    await news.getByRole('button', { name: 'Resume' }).click();
    await poll(() => news.locator('[data-state]').textContent()).toBe('active');
    expect(jobs.calls.at(-1)).toEqual({ op: 'pause', id: 'morning-news', paused: false });

    // The scheduler runs the reminder: /status changes, and the page reloads the table.
    jobs.views.get('reminder')!.state = { ...jobs.views.get('reminder')!.state, lastRunAt: Date.now(), lastOutcome: 'delivered', runs: 2 };
    await poll(() => row(p, 'reminder').locator('[data-outcome]').textContent()).toBe('delivered');
    // This stand-in gateway has no web chat, whose event stream the page opens at start.
    expect(errors.filter((e) => !e.includes('/webchat/events'))).toEqual([]);
    await context.close();
  });
});
