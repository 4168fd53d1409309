import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSlackChannel } from '../../../channels/slack/index.ts';
import type { ChannelAdapter, Submission } from '../../../src/core/channel-adapter.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import type { DeliveryTarget } from '../../../src/core/message.ts';
import { startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { APP_TOKEN, BOT_TOKEN, SIGNING_SECRET } from './helpers.ts';

const accepted = (): Submission => ({ status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) });
const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('Slack media out (SPEC §15): image lines as image blocks, files through files.uploadV2', () => {
  let slack: FakeSlack;
  let adapter: ChannelAdapter;
  let tmp: ReturnType<typeof tempDir>;
  const dm: DeliveryTarget = { channel: 'slack', accountId: 'default', chatId: 'D0001', chatType: 'direct' };
  const posts = () => slack.callsOf('chat.postMessage').filter((c) => c.status === 200);

  beforeEach(async () => {
    slack = await startFakeSlack({ botToken: BOT_TOKEN });
    tmp = tempDir();
    adapter = createSlackChannel({
      account: { accountId: 'default', enabled: true, dmPolicy: 'open', allowFrom: [], groupPolicy: 'open', groups: [], requireMention: true, botToken: BOT_TOKEN, appToken: APP_TOKEN, signingSecret: SIGNING_SECRET, apiUrl: slack.apiUrl, mode: 'http' },
      clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', delivery: { maxAttempts: 4, baseDelayMs: 1, maxDelayMs: 2 },
    });
    await adapter.start(async () => accepted());
  });
  afterEach(async () => {
    await adapter.stop();
    await slack.close();
    tmp.remove();
  });

  it('text, an image block, text: in order', async () => {
    await adapter.send(dm, { text: 'Here:\n![chart](https://example.com/c.png)\nDone.' });
    expect(posts().map((c) => c.body.text)).toEqual(['Here:', 'chart', 'Done.']);
    expect(posts()[0]!.body.blocks).toBeUndefined();
    expect(JSON.parse(String(posts()[1]!.body.blocks))).toEqual([{ type: 'image', image_url: 'https://example.com/c.png', alt_text: 'chart' }]);
  });

  it('in a channel every message goes into the thread of the question', async () => {
    await adapter.send({ ...dm, chatId: 'C777', chatType: 'channel', replyToId: 'C777:1700000000.000100' }, { text: '![a](https://example.com/a.png)\nafter' });
    expect(posts().map((c) => c.body.thread_ts)).toEqual(['1700000000.000100', '1700000000.000100']);
  });

  it('files are uploaded after the text (getUploadURLExternal, the upload URL, completeUploadExternal) with their bytes and names', async () => {
    const pdf = randomBytes(30_000);
    writeFileSync(path.join(tmp.dir, 'report.pdf'), pdf);
    slack.script('files.completeUploadExternal', { status: 503, body: { error: 'service_unavailable' } });
    await adapter.send({ ...dm, chatId: 'C777', chatType: 'channel', replyToId: 'C777:1700000000.000200' }, {
      text: 'The report:', files: [{ path: path.join(tmp.dir, 'report.pdf'), name: 'report.pdf', mime: 'application/pdf', size: pdf.length }],
    });
    expect(posts().map((c) => c.body.text)).toEqual(['The report:']);
    const completed = slack.uploads.filter((u) => u.completed);
    expect(completed).toHaveLength(1);
    expect(completed[0]).toMatchObject({ filename: 'report.pdf', size: pdf.length, sha256: sha(pdf), channel: 'C777', threadTs: '1700000000.000200' });
    // The 503 of the completion was tried again (the whole upload, through the channel's send retries).
    expect(slack.callsOf('files.completeUploadExternal').map((c) => c.status)).toEqual([503, 200]);
    // The text went before the upload.
    expect(posts()[0]!.at).toBeLessThanOrEqual(slack.callsOf('files.getUploadURLExternal')[0]!.at);
  });
});
