import { describe, expect, it } from 'vitest';
import { normalizeSlackEvent, SLACK_TEXT_CAP, slackToPlainText, type NormalizeResult } from '../../../channels/slack/normalize.ts';

const bot = { userId: 'UBOT', botId: 'BBOT', teamId: 'T1' };
const normalize = (text: string, type = 'message', channelType = 'channel'): NormalizeResult => normalizeSlackEvent({
  event: { type, channel: 'C1', channel_type: channelType, user: 'U42', text, ts: '1700000000.000100' },
  envelope: { event_id: 'Ev1', team_id: 'T1' }, accountId: 'default', bot, receivedAt: 1,
});

/** The slowest of a few runs of `work`, in ms. */
function slowest(work: () => unknown, runs = 3): number {
  let worst = 0;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    work();
    worst = Math.max(worst, performance.now() - started);
  }
  return worst;
}

describe('slack markup parsing cost on hostile text', () => {
  it('scans text of many "<@UBOT|" without a ">" in about the time of plain text (was quadratic: seconds, minutes for a megabyte)', () => {
    const hostile = '<@UBOT|'.repeat(12_000);
    const plain = 'hello w'.repeat(12_000);
    const floor = slowest(() => { normalize(plain); normalize(plain, 'app_mention'); slackToPlainText(plain, 'UBOT'); });
    const cost = slowest(() => { normalize(hostile); normalize(hostile, 'app_mention'); slackToPlainText(hostile, 'UBOT'); });
    // Before, one such text took seconds; the machine is shared, so the bound is relative to the plain text's time.
    expect(cost, JSON.stringify({ cost, floor })).toBeLessThan(floor * 10 + 50);
  });

  it('still finds and removes the bot mention, with a label of ordinary length', () => {
    expect(normalize('<@UBOT|switchboard> hi')).toEqual({ kind: 'ignored', reason: 'mention (answered as app_mention)' });
    expect(slackToPlainText('<@UBOT|switchboard> /status', 'UBOT')).toBe('/status');
  });

  it('cuts an event text longer than Slack allows before parsing it, still over any inbound limit', () => {
    const result = normalize('a'.repeat(SLACK_TEXT_CAP + 5000), 'message', 'im');
    expect(result.kind).toBe('message');
    if (result.kind === 'message') expect(result.message.text).toHaveLength(200_000);
  });
});
