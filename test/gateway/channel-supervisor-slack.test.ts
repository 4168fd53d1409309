import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { startFakeSlack, type FakeSlack } from '../fakes/fake-slack.ts';
import { testConfig } from '../helpers/gateway.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const BOT_TOKEN = 'xoxb-test-bot-token';
const APP_TOKEN = 'xapp-1-test-app-token';

describe('a Slack app token that Slack refuses', () => {
  let slack: FakeSlack;
  const tmp = useTempDir();
  let gw: RunningGateway | undefined;
  beforeEach(async () => {
    slack = await startFakeSlack({ appToken: APP_TOKEN });
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await slack.close();
  });

  it('apps.connections.open answering invalid_auth is tried once: the channel gives up with one clear line', async () => {
    const timers = new ManualTimers();
    const config = testConfig(tmp.dir, {}, { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_APP_TOKEN: 'xapp-1-revoked-token', SLACK_API_URL: slack.apiUrl });
    gw = await startGateway({ config, logger: silentLogger(), supervision: { timers, watchMs: 5000 } });
    await gw.supervisor.firstAttempts();
    for (let i = 0; i < 5; i++) timers.advance(600_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(slack.callsOf('apps.connections.open')).toHaveLength(1);
    expect(gw.supervisor.health().filter((h) => h.id === 'slack')).toEqual([expect.objectContaining({
      id: 'slack', state: 'gave-up', lastErrorCode: 'SLACK_AUTH_FAILED',
      lastError: 'Slack account "default": Socket Mode did not connect (invalid_auth); check SLACK_APP_TOKEN and that Socket Mode is on for the app.',
    })]);
  });
});
