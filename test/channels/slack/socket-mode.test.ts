import { createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../../src/main.ts';
import { dmEvent, eventCallback, mentionEvent, nextTs, startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { startTestGateway, tempDir } from '../../helpers/gateway.ts';
import { APP_TOKEN, BOT_TOKEN, capturingLogger, sessionKeys, until } from './helpers.ts';

/** A port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('Slack in Socket Mode, through the whole gateway (real bolt, fake Socket Mode server)', () => {
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

  const env = (overrides: Record<string, string> = {}) => ({ SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_APP_TOKEN: APP_TOKEN, SLACK_API_URL: slack.apiUrl, ...overrides });

  it('acks an events_api envelope and answers it (offline provider)', async () => {
    gw = await startTestGateway({ dir: tmp.dir, env: env(), config: { channels: { slack: { dmPolicy: 'open', channels: ['*'] } } } });
    const adapter = gw.adapters.find((a) => a.id === 'slack')!;
    expect(adapter.status).toBe('running');
    expect(adapter.routes?.() ?? []).toEqual([]);
    await slack.waitForSocket();
    const open = slack.callsOf('apps.connections.open')[0]!;
    expect(open.headers.authorization).toBe(`Bearer ${APP_TOKEN}`);

    const ack = await slack.sendEnvelope(eventCallback(dmEvent('hello over the socket')), { envelopeId: 'env-dm-1' });
    expect(ack.envelope_id).toBe('env-dm-1');
    const reply = await slack.waitFor('chat.postMessage');
    expect(reply.body.channel).toBe('D123');
    expect(String(reply.body.text)).toMatch(/offline/i);

    const ts = nextTs();
    await slack.sendEnvelope(eventCallback(mentionEvent('and in a channel', { ts })));
    const threaded = await slack.waitFor('chat.postMessage', (c) => c.body.channel === 'C777');
    expect(threaded.body.thread_ts).toBe(ts);
    await until(async () => (await sessionKeys(gw!)).length === 2, 'two sessions');
    expect(await sessionKeys(gw)).toEqual(['agent:main:main', 'agent:main:slack:channel:c777']);
  });

  it('processes a redelivered envelope (same event_id, retry_attempt 1) once', async () => {
    gw = await startTestGateway({ dir: tmp.dir, env: env(), config: { channels: { slack: { dmPolicy: 'open' } } } });
    await slack.waitForSocket();
    const body = eventCallback(dmEvent('once'), { eventId: 'EvSOCK1' });
    await slack.sendEnvelope(body);
    await slack.waitFor('chat.postMessage');
    const again = await slack.sendEnvelope(body, { retryAttempt: 1 });
    expect(again.envelope_id).toBeTruthy();
    await until(() => !gw!.gateway.lanes.isRunning('agent:main:main'), 'the turn to end');
    expect(slack.callsOf('chat.postMessage')).toHaveLength(1);
  });

  it('reconnects when Slack asks it to (disconnect message), and goes on answering', async () => {
    gw = await startTestGateway({ dir: tmp.dir, env: env(), config: { channels: { slack: { dmPolicy: 'open' } } } });
    await slack.waitForSocket();
    await slack.disconnectSockets();
    await until(() => slack.callsOf('apps.connections.open').length === 2 && slack.sockets === 1, 'a second connection');
    await slack.sendEnvelope(eventCallback(dmEvent('still there?')));
    await slack.waitFor('chat.postMessage');
    expect(gw.adapters.find((a) => a.id === 'slack')?.status).toBe('running');
  });

  it('fails fast with one clear line when the Slack API is unreachable, while the gateway runs on', async () => {
    const port = await closedPort();
    const { logger, lines } = capturingLogger([BOT_TOKEN, APP_TOKEN]);
    const started = Date.now();
    gw = await startTestGateway({ dir: tmp.dir, env: env({ SLACK_API_URL: `http://127.0.0.1:${port}/api/` }), logger });
    expect(Date.now() - started).toBeLessThan(5000);
    const adapter = gw.adapters.find((a) => a.id === 'slack')!;
    expect(adapter.status).toBe('failed');
    expect(adapter.statusDetail).toMatch(/cannot reach the Slack API at http:\/\/127\.0\.0\.1:\d+\/api\/ \(ECONNREFUSED\)/);
    expect(adapter.statusDetail).not.toContain('\n');
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
    const failures = lines().filter((l) => Number(l.level) >= 40);
    expect(failures).toHaveLength(1);
    expect(String(failures[0]!.msg)).toMatch(/^channel slack\/default did not start: Slack account "default": cannot reach/);
    expect(JSON.stringify(lines())).not.toContain(BOT_TOKEN);
  });

  it('fails with one line when Slack refuses the tokens', async () => {
    const { logger, lines } = capturingLogger([BOT_TOKEN, 'xapp-1-wrong-token']);
    slack.script('auth.test', { body: { ok: false, error: 'invalid_auth' } });
    gw = await startTestGateway({ dir: tmp.dir, env: env(), logger });
    expect(gw.adapters.find((a) => a.id === 'slack')?.statusDetail).toMatch(/bot token was refused \(invalid_auth\)/);
    await gw.stop();

    gw = await startTestGateway({ dir: tmp.dir, env: env({ SLACK_APP_TOKEN: 'xapp-1-wrong-token' }), logger });
    expect(gw.adapters.find((a) => a.id === 'slack')?.statusDetail).toMatch(/Socket Mode did not connect \(invalid_auth\)/);
    expect(slack.sockets).toBe(0);
    expect(JSON.stringify(lines())).not.toMatch(/xoxb-test|xapp-1-wrong/);
  });

  it('asks for the app token in Socket Mode and the signing secret in HTTP mode', async () => {
    gw = await startTestGateway({ dir: tmp.dir, env: env({ SLACK_APP_TOKEN: '' }) });
    expect(gw.adapters.find((a) => a.id === 'slack')?.statusDetail).toMatch(/Socket Mode needs SLACK_APP_TOKEN/);
    await gw.stop();
    gw = await startTestGateway({ dir: tmp.dir, env: env(), config: { channels: { slack: { mode: 'http' } } } });
    expect(gw.adapters.find((a) => a.id === 'slack')?.statusDetail).toMatch(/HTTP mode needs SLACK_SIGNING_SECRET/);
    expect(slack.calls).toHaveLength(0);
  });
});
