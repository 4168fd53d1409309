import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../../src/main.ts';
import { dmEvent, eventCallback, startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { tempDir, testConfig } from '../../helpers/gateway.ts';
import { ManualTimers } from '../../helpers/manual-timers.ts';
import { APP_TOKEN, BOT_TOKEN } from './helpers.ts';
import { capturingLogger } from '../../helpers/log-capture.ts';

type Ready = { status: number; body: { ready: boolean; failing?: { name: string; status?: string; state?: string; error: string }[] } };

describe('Slack Socket Mode: the connection drops after the channel connected', () => {
  let slack: FakeSlack;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;
  beforeEach(async () => {
    slack = await startFakeSlack({ appToken: APP_TOKEN });
    tmp = tempDir();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await slack.close();
    tmp.remove();
  });

  const start = async (timers: ManualTimers) => {
    const { logger, lines } = capturingLogger();
    const config = testConfig(tmp.dir, { session: { dmScope: 'per-peer' }, channels: { slack: { dmPolicy: 'open' } } }, { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_APP_TOKEN: APP_TOKEN, SLACK_API_URL: slack.apiUrl });
    gw = await startGateway({ config, logger, supervision: { timers, watchMs: 5000 } });
    await gw.supervisor.firstAttempts();
    await slack.waitForSocket();
    return lines;
  };
  const readyz = async (): Promise<Ready> => {
    const response = await fetch(`${gw!.url}/readyz`);
    return { status: response.status, body: await response.json() as Ready['body'] };
  };
  const slackAdapter = () => gw!.adapters.find((a) => a.id === 'slack')!;

  it('is not ready while Slack is down (one warning), and ready again once it reconnects', { timeout: 20_000 }, async () => {
    const lines = await start(new ManualTimers());
    expect(await readyz()).toEqual({ status: 200, body: { ready: true } });

    slack.down = true;
    slack.dropSockets();
    await expect.poll(async () => (await readyz()).status).toBe(503);
    expect((await readyz()).body.failing).toEqual([expect.objectContaining({
      name: 'slack/default', status: 'starting', state: 'connected', error: expect.stringMatching(/^Slack account "default": Socket Mode (connection lost|reconnect failed: HTTP 503); reconnecting$/),
    })]);
    // The SDK's own short retries (0.5 s, then 1 s): the failed one is the reason, without another warning.
    await expect.poll(() => slackAdapter().statusDetail, { timeout: 5000 }).toBe('Slack account "default": Socket Mode reconnect failed: HTTP 503; reconnecting');
    expect(slack.callsOf('apps.connections.open').filter((c) => c.status === 503).length).toBeGreaterThan(0);

    slack.down = false;
    await expect.poll(async () => (await readyz()).status, { timeout: 8000 }).toBe(200);
    expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual(['slack: Socket Mode connection lost; reconnecting']);
    expect(lines.filter((l) => l.msg === 'slack: Socket Mode reconnected')).toHaveLength(1);
    expect(gw!.supervisor.health()[1]).toMatchObject({ state: 'connected', attempts: 1 });
    await slack.sendEnvelope(eventCallback(dmEvent('back?')));
    await slack.waitFor('chat.postMessage');
  });

  it('names the outage\'s own reason, not an older start-up failure', { timeout: 20_000 }, async () => {
    const timers = new ManualTimers();
    slack.down = true;
    const config = testConfig(tmp.dir, { session: { dmScope: 'per-peer' }, channels: { slack: { dmPolicy: 'open' } } }, { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_APP_TOKEN: APP_TOKEN, SLACK_API_URL: slack.apiUrl });
    gw = await startGateway({ config, logger: capturingLogger().logger, supervision: { timers, random: () => 0.5, watchMs: 600_000 } });
    await gw.supervisor.firstAttempts();
    expect((await readyz()).body.failing).toEqual([expect.objectContaining({ name: 'slack/default', state: 'retrying', error: expect.stringContaining('Socket Mode did not connect (HTTP 503)') })]);
    slack.down = false;
    timers.advance(1000);
    await expect.poll(async () => (await readyz()).status, { timeout: 5000 }).toBe(200);

    slack.dropSockets();
    await expect.poll(async () => (await readyz()).status, { timeout: 5000 }).toBe(503);
    expect((await readyz()).body.failing).toEqual([expect.objectContaining({
      name: 'slack/default', state: 'connected', error: 'Slack account "default": Socket Mode connection lost; reconnecting',
    })]);
    await expect.poll(async () => (await readyz()).status, { timeout: 5000 }).toBe(200);
  });

  it('gives up with one error line when the app token is revoked mid-run', { timeout: 20_000 }, async () => {
    const timers = new ManualTimers();
    const lines = await start(timers);
    slack.revokeAppToken('token_revoked');
    slack.dropSockets();
    await expect.poll(() => slackAdapter().status, { timeout: 5000 }).toBe('failed');
    timers.advance(5000);
    await expect.poll(() => gw!.supervisor.health()[1]?.state).toBe('gave-up');
    for (let i = 0; i < 5; i++) timers.advance(600_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(gw!.supervisor.health()[1]).toMatchObject({ state: 'gave-up', attempts: 1, lastErrorCode: 'SLACK_AUTH_FAILED' });
    expect(slack.callsOf('apps.connections.open')).toHaveLength(2);
    const message = 'Slack account "default": Socket Mode could not reconnect, the app token was refused (token_revoked); check SLACK_APP_TOKEN (xapp-… with connections:write), then restart.';
    const ready = await readyz();
    expect(ready.status).toBe(503);
    expect(ready.body.failing).toEqual([expect.objectContaining({ name: 'slack/default', status: 'failed', state: 'gave-up', error: message })]);
    expect(lines.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([`channel slack/default stopped: ${message}`]);
  });
});
