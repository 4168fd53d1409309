import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChannelAdapter } from '../../../src/core/channel-adapter.ts';
import type { DeliveryTarget } from '../../../src/core/message.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { startTestGateway, tempDir } from '../../helpers/gateway.ts';
import { BOT_TOKEN, SIGNING_SECRET } from './helpers.ts';

/** Slack Web API sends that Slack did not take are tried again (SPEC §16), through the real bolt web client. */
describe('Slack delivery: what Slack did not take is sent again', () => {
  let slack: FakeSlack;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway;
  let adapter: ChannelAdapter;
  const target: DeliveryTarget = { channel: 'slack', accountId: 'default', chatId: 'D0001', chatType: 'direct' };
  const posted = () => slack.callsOf('chat.postMessage').filter((c) => c.status === 200).map((c) => String(c.body.text));

  beforeEach(async () => {
    slack = await startFakeSlack();
    tmp = tempDir();
    gw = await startTestGateway({
      dir: tmp.dir,
      env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: slack.apiUrl },
      config: { channels: { slack: { mode: 'http', dmPolicy: 'open' } }, delivery: { maxAttempts: 5, retryBaseMs: 1, retryMaxMs: 4 } },
    });
    adapter = gw.adapters.find((a) => a.id === 'slack')!;
  });
  afterEach(async () => {
    await gw.stop();
    await slack.close();
    tmp.remove();
  });

  it('a post whose connection was reset, then answered 503, then rate-limited, is posted once', async () => {
    let cuts = 0;
    slack.resetConnection = (method) => method === 'chat.postMessage' && ++cuts === 1;
    slack.script('chat.postMessage', { status: 503, body: { error: 'service_unavailable' } });
    slack.script('chat.postMessage', { status: 429, headers: { 'retry-after': '0' }, body: { error: 'ratelimited' } });
    await adapter.send(target, { text: 'made it through' });
    expect(slack.resets).toBe(1);
    expect(slack.callsOf('chat.postMessage').map((c) => c.status)).toEqual([503, 429, 200]);
    expect(posted()).toEqual(['made it through']);
  });

  it('gives up after delivery.maxAttempts and throws; a platform refusal (channel_not_found) is not retried', async () => {
    slack.resetConnection = (method) => method === 'chat.postMessage';
    await expect(adapter.send(target, { text: 'never' })).rejects.toThrow(/chat\.postMessage/);
    expect(slack.resets).toBe(5);

    slack.resetConnection = undefined;
    slack.script('chat.postMessage', { body: { ok: false, error: 'channel_not_found' } });
    await expect(adapter.send(target, { text: 'nowhere' })).rejects.toThrow(/channel_not_found/);
    expect(slack.callsOf('chat.postMessage')).toHaveLength(1);
  });
});
