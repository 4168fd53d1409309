import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeSlack, type FakeSlack } from '../fakes/fake-slack.ts';
import { bin, cleanEnv } from '../helpers/process.ts';
import { useTempDir } from '../helpers/fixtures.ts';

/** Runs `switchboard <args>` to the end; resolves with its exit code and output. */
function run(dir: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [bin, ...args], { cwd: dir, env: cleanEnv(dir, env), timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
    child.stdin?.end('');
  });
}

const closedPort = async () => {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
};

describe('doctor probes the Slack app token in Socket Mode (issue 14)', () => {
  const tmp = useTempDir();
  let slack: FakeSlack;
  beforeEach(async () => {
    slack = await startFakeSlack({ appToken: 'xapp-1-good' });
  });
  afterEach(async () => {
    await slack.close();
  });

  const doctor = async (appToken: string) => run(tmp.dir, ['doctor'], {
    SWITCHBOARD_PORT: String(await closedPort()),
    SLACK_BOT_TOKEN: 'xoxb-bot', SLACK_APP_TOKEN: appToken, SLACK_API_URL: slack.apiUrl,
  });

  it('a wrong app token FAILs with what to do, and the exit code is 1, although the bot token is accepted', async () => {
    const result = await doctor('xapp-1-wrong');
    expect(result.stdout).toMatch(/^ok\s+slack\/default: bot token accepted \(team Fake Team\)$/m);
    expect(result.stdout).toMatch(/^FAIL\s+slack\/default: Slack refused the app token \(invalid_auth\): check SLACK_APP_TOKEN: an app-level token with connections:write \(xapp-…, Basic Information → App-Level Tokens\), with Socket Mode enabled$/m);
    expect(result.stdout).not.toContain('xapp-1-wrong');
    expect(result.code).toBe(1);
    expect(slack.callsOf('apps.connections.open').map((c) => c.headers.authorization)).toEqual(['Bearer xapp-1-wrong']);
  }, 30_000);

  it('the right app token is ok and the exit code is 0', async () => {
    const result = await doctor('xapp-1-good');
    expect(result.stdout).toMatch(/^ok\s+slack\/default: app token accepted \(Socket Mode can connect\)$/m);
    expect(result.stdout).not.toMatch(/^FAIL/m);
    expect(result.code).toBe(0);
  }, 30_000);

  it('in HTTP mode the app token is not used, so it is not probed', async () => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({ channels: { slack: { mode: 'http' } } }));
    const result = await run(tmp.dir, ['doctor'], {
      SWITCHBOARD_PORT: String(await closedPort()),
      SLACK_BOT_TOKEN: 'xoxb-bot', SLACK_APP_TOKEN: 'xapp-1-wrong', SLACK_SIGNING_SECRET: 'shh', SLACK_API_URL: slack.apiUrl,
    });
    expect(result.stdout).toMatch(/^ok\s+slack\/default: bot token accepted \(team Fake Team\)$/m);
    expect(result.stdout).not.toContain('app token');
    expect(slack.callsOf('apps.connections.open')).toEqual([]);
    expect(result.code).toBe(0);
  }, 30_000);
});
