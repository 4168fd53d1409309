import { execFile } from 'node:child_process';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import type { ServerType } from '@hono/node-server';
import { afterEach, describe, expect, it } from 'vitest';
import { gatewayJobs, GatewayClient } from '../../src/cli/gateway-client.ts';
import { jobsAdd, jobsList, jobsRemove, jobsRun, jobsSetPaused, jobsTable } from '../../src/cli/jobs.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { StateLock } from '../../src/core/state-lock.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { jobViewJson, mountJobRoutes } from '../../src/http/job-routes.ts';
import { closeGracefully, listen } from '../../src/http/serve.ts';
import { useTempDir } from '../helpers/fixtures.ts';
import { bin, cleanEnv } from '../helpers/process.ts';
import { FakeJobs } from '../http/fake-jobs.ts';

const run = promisify(execFile);
const TOKEN = 'cli-token-123';
const H = Date.parse('2026-12-02T07:00:00Z');

/** `switchboard jobs …` against a gateway serving `/admin/jobs` over a fake scheduler. */
describe('switchboard jobs', () => {
  const tmp = useTempDir('switchboard-jobs-cli-');
  let server: ServerType | undefined;
  afterEach(async () => {
    if (server) await closeGracefully(server, 100);
    server = undefined;
  });

  const serve = async (authToken = TOKEN) => {
    const jobs = new FakeJobs();
    const app = createHttpApp({ authToken, maxBodyBytes: 100_000, logger: silentLogger(), channelRoutes: [], mounts: [mountJobRoutes({ jobs })] });
    const listening = await listen(app.fetch, '127.0.0.1', 0);
    server = listening.server;
    return { jobs, url: `http://127.0.0.1:${listening.port}` };
  };
  const output = () => {
    const out = new PassThrough();
    return { out, text: () => String(out.read() ?? '') };
  };

  it('list prints a table: id, schedule (with its zone), next run, last run and outcome, paused', async () => {
    const { jobs, url } = await serve();
    jobs.seed({ id: 'news', timezone: 'Europe/Berlin' }, { lastRunAt: H - 60_000, lastOutcome: 'delivered' });
    jobs.seed({ id: 'reminder-1', schedule: '2026-12-24T17:00' }, { paused: true }, null);
    const o = output();
    await jobsList(gatewayJobs(new GatewayClient(url, TOKEN)), false, o.out);
    expect(o.text()).toBe([
      'ID          SCHEDULE                   NEXT RUN           LAST RUN                     PAUSED',
      'news        0 8 * * * (Europe/Berlin)  2026-12-02 08:00Z  2026-12-02 06:59Z delivered  -',
      'reminder-1  2026-12-24T17:00           -                  -                            paused',
      '',
    ].join('\n'));
    const json = output();
    await jobsList(gatewayJobs(new GatewayClient(url, TOKEN)), true, json.out);
    expect(JSON.parse(json.text())).toEqual({ jobs: (await jobs.list()).map(jobViewJson) });
    expect(jobsTable([])).toBe('ID  SCHEDULE  NEXT RUN  LAST RUN  PAUSED\n');
  });

  it('add, run, pause, resume and remove go through /admin/jobs; the server\'s message is the error', async () => {
    const { jobs, url } = await serve();
    const client = gatewayJobs(new GatewayClient(url, TOKEN));
    const o = output();
    await jobsAdd(client, { schedule: '0 8 * * *', prompt: 'Morning news', channel: 'telegram', peer: '123', tz: 'Europe/Berlin', id: 'news', agent: 'main', thread: '9', account: 'default', tokenBudget: '9000' }, o.out);
    expect(o.text()).toBe('Added job news (0 8 * * * (Europe/Berlin)); next run 2026-12-02 08:00Z.\n');
    expect(jobs.calls[0]).toEqual({
      op: 'add', createdBy: 'cli',
      input: { id: 'news', schedule: '0 8 * * *', prompt: 'Morning news', timezone: 'Europe/Berlin', agentId: 'main', tokenBudget: 9000, deliverTo: { channel: 'telegram', accountId: 'default', peer: '123', threadId: '9' } },
    });
    await jobsRun(client, 'news', o.out);
    await jobsSetPaused(client, 'news', true, o.out);
    await jobsSetPaused(client, 'news', false, o.out);
    await jobsRemove(client, 'news', o.out);
    expect(o.text()).toBe([
      'Queued a run of job news; its answer goes where the job delivers.', 'Paused job news.', 'Resumed job news; next run 2026-12-02 08:00Z.', 'Removed job news.', '',
    ].join('\n'));
    await expect(jobsAdd(client, { schedule: 'bad', prompt: 'x', channel: 'telegram', group: '-100' }, o.out)).rejects.toMatchObject({ code: 'SCHEDULE_INVALID', status: 400, message: expect.stringContaining('Schedule "bad" is not a cron expression') });
    await expect(jobsRemove(client, 'news', o.out)).rejects.toMatchObject({ status: 404, message: 'No job "news".' });
    await expect(jobsAdd(client, { schedule: '0 8 * * *', prompt: 'x', channel: 'telegram' }, o.out)).rejects.toThrow(/exactly one of --peer/);
    await expect(jobsAdd(client, { schedule: '0 8 * * *', prompt: 'x', channel: 'irc', peer: '1' }, o.out)).rejects.toThrow('Field "deliverTo.channel"');
    await expect(jobsList(gatewayJobs(new GatewayClient(url, 'wrong')), false, o.out)).rejects.toThrow(/refused the bearer token/);
  });

  it('the command line: list and add against the gateway owning the state folder; errors on stderr with exit 1; none running says to start one', async () => {
    const env = cleanEnv(tmp.dir);
    const cli = (...args: string[]) => run(process.execPath, [bin, 'jobs', ...args], { cwd: tmp.dir, env }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );
    const none = await cli('list');
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^switchboard: No gateway runs on the state folder .*start it \(switchboard start\)/);

    const { jobs, url } = await serve('');
    const lock = await StateLock.acquire(path.join(tmp.dir, 'data'), { role: 'gateway', command: 'test' });
    try {
      lock.update({ url, port: Number(new URL(url).port) });
      const added = await cli('add', '--schedule', '0 8 * * *', '--prompt', 'Morning news', '--channel', 'telegram', '--peer', '123', '--tz', 'Europe/Berlin', '--id', 'news');
      expect(added).toMatchObject({ code: 0, stdout: 'Added job news (0 8 * * * (Europe/Berlin)); next run 2026-12-02 08:00Z.\n' });
      expect((await cli('list')).stdout).toMatch(/^ID\s+SCHEDULE\s+NEXT RUN\s+LAST RUN\s+PAUSED\nnews\s+0 8 \* \* \* \(Europe\/Berlin\)\s+2026-12-02 08:00Z\s+-\s+-\n$/);
      const refused = await cli('add', '--schedule', '* * * * * *', '--prompt', 'x', '--channel', 'telegram', '--peer', '1');
      expect(refused).toMatchObject({ code: 1, stderr: 'switchboard: Schedule "* * * * * *" fires every 1 s; scheduler.minIntervalSeconds is 60.\n' });
      expect((await cli('pause', 'nope')).stderr).toBe('switchboard: No job "nope".\n');
      expect(jobs.calls.map((c) => c.op)).toEqual(['add', 'add', 'pause']);
    } finally {
      await lock.release();
    }
  }, 60_000);
});
