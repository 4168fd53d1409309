import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { slackReactionName } from '../../../channels/slack/react.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { dmEvent, eventCallback, mentionEvent, nextTs, startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { startTestGateway, tempDir } from '../../helpers/gateway.ts';
import { APP_TOKEN, BOT_TOKEN } from './helpers.ts';

describe('Slack ack reaction (reactions.add through real bolt and web-api against a fake Slack)', () => {
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

  const start = async (slackSettings: Record<string, unknown> = {}) => {
    gw = await startTestGateway({
      dir: tmp.dir, env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_APP_TOKEN: APP_TOKEN, SLACK_API_URL: slack.apiUrl },
      config: { channels: { slack: { dmPolicy: 'open', channels: ['*'], ...slackSettings } }, delivery: { maxAttempts: 1 } },
    });
    await slack.waitForSocket();
  };

  it('adds :eyes: to a channel message that triggers a run; none to one that does not, none in a DM', async () => {
    await start();
    await slack.sendEnvelope(eventCallback(dmEvent('a DM first')));
    await slack.waitFor('chat.postMessage', (c) => c.body.channel === 'D123');
    await slack.sendEnvelope(eventCallback({ type: 'message', channel_type: 'channel', channel: 'C777', user: 'U42', text: 'just chatting', ts: nextTs(), team: 'T1' }));
    const ts = nextTs();
    await slack.sendEnvelope(eventCallback(mentionEvent('what now?', { ts })));
    await slack.waitFor('chat.postMessage', (c) => c.body.channel === 'C777');
    const reaction = await slack.waitFor('reactions.add');
    expect(reaction.body).toMatchObject({ channel: 'C777', timestamp: ts, name: 'eyes' });
    expect(slack.callsOf('reactions.add')).toHaveLength(1);
  });

  it('"" turns it off; a :name: is taken as written', async () => {
    await start({ ackReaction: '' });
    await slack.sendEnvelope(eventCallback(mentionEvent('quiet please')));
    await slack.waitFor('chat.postMessage', (c) => c.body.channel === 'C777');
    expect(slack.callsOf('reactions.add')).toEqual([]);
    expect(slackReactionName(':hourglass_flowing_sand:')).toBe('hourglass_flowing_sand');
    expect(slackReactionName('👍🏽')).toBe('+1');
    expect(() => slackReactionName('🦩')).toThrow(/":name:"/);
  });

  it('a refused reaction does not fail the turn', async () => {
    await start();
    slack.script('reactions.add', { body: { ok: false, error: 'missing_scope' } });
    await slack.sendEnvelope(eventCallback(mentionEvent('are you ok?')));
    const reply = await slack.waitFor('chat.postMessage', (c) => c.body.channel === 'C777');
    expect(String(reply.body.text)).not.toMatch(/^Sorry/);
    expect(slack.callsOf('reactions.add')).toHaveLength(1);
  });
});
