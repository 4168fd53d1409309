import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramChannel } from '../../../channels/telegram/index.ts';
import type { ChannelAdapter } from '../../../src/core/channel-adapter.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import type { DeliveryTarget } from '../../../src/core/message.ts';
import { startFakeTelegram, type FakeTelegram, type UploadedPart } from '../../fakes/fake-telegram.ts';
import { tempDir, testConfig } from '../../helpers/gateway.ts';
import { telegramConfig } from './harness.ts';

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const ANSWER = 'Here:\n![chart](https://example.com/c.png)\nDone.';

describe('Telegram media out (SPEC §15): image lines as photos, files as uploads', () => {
  let telegram: FakeTelegram;
  let tmp: ReturnType<typeof tempDir>;
  let channel: ChannelAdapter | undefined;
  const dmTarget: DeliveryTarget = { channel: 'telegram', accountId: 'default', chatId: '42', chatType: 'direct' };

  beforeEach(async () => {
    telegram = await startFakeTelegram();
    tmp = tempDir();
    const config = testConfig(tmp.dir, telegramConfig(), { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    channel = createTelegramChannel({
      account: config.channels.telegram[0]!, clock: systemClock, logger: silentLogger(), stateDir: config.stateDir,
      delivery: { maxAttempts: 4, baseDelayMs: 1, maxDelayMs: 2 },
    });
    await channel.start(async () => { throw new Error('no intake in this test'); });
  });
  afterEach(async () => {
    await channel?.stop();
    channel = undefined;
    await telegram.close();
    tmp.remove();
  });

  const sends = () => telegram.calls.filter((c) => ['sendMessage', 'sendPhoto', 'sendDocument'].includes(c.method) && c.response.ok);

  it('an image alone on its line goes as a photo by URL (alt as caption) between the text before and after it', async () => {
    await channel!.send(dmTarget, { text: ANSWER });
    expect(sends().map((c) => c.method)).toEqual(['sendMessage', 'sendPhoto', 'sendMessage']);
    const [before, photo, after] = sends();
    expect(before!.body.text).toBe('Here:');
    expect(photo!.body).toMatchObject({ chat_id: 42, photo: 'https://example.com/c.png', caption: 'chart' });
    expect(after!.body.text).toBe('Done.');
  });

  it('in a group the first message (here the photo) replies to the question, the rest do not', async () => {
    const group: DeliveryTarget = { ...dmTarget, chatId: '-1001', chatType: 'group', replyToId: '-1001:77' };
    await channel!.send(group, { text: '![chart](https://example.com/c.png)\nDone.' });
    const [photo, after] = sends();
    expect(photo!.method).toBe('sendPhoto');
    expect(photo!.body.reply_parameters).toMatchObject({ message_id: 77 });
    expect(after!.body.reply_parameters).toBeUndefined();
  });

  it('a URL Telegram cannot fetch (400) is sent as a link instead, in its place', async () => {
    telegram.failNext('sendPhoto', { error_code: 400, description: 'Bad Request: wrong file identifier/HTTP URL specified' });
    await channel!.send(dmTarget, { text: ANSWER });
    expect(sends().map((c) => c.method)).toEqual(['sendMessage', 'sendMessage', 'sendMessage']);
    expect(sends()[1]!.body.text).toContain('https://example.com/c.png');
  });

  it('files are uploaded after the text with their bytes and names: a PNG as a photo, a PDF as a document', async () => {
    const png = randomBytes(4096);
    const pdf = randomBytes(70_000);
    writeFileSync(path.join(tmp.dir, 'chart.png'), png);
    writeFileSync(path.join(tmp.dir, 'report.pdf'), pdf);
    await channel!.send(dmTarget, {
      text: 'The files:',
      files: [
        { path: path.join(tmp.dir, 'chart.png'), name: 'chart.png', mime: 'image/png', size: png.length },
        { path: path.join(tmp.dir, 'report.pdf'), name: 'report.pdf', mime: 'application/pdf', size: pdf.length },
      ],
    });
    expect(sends().map((c) => c.method)).toEqual(['sendMessage', 'sendPhoto', 'sendDocument']);
    const photo = (sends()[1]!.body.files as UploadedPart[])[0]!;
    const document = (sends()[2]!.body.files as UploadedPart[])[0]!;
    expect(photo).toMatchObject({ filename: 'chart.png', size: png.length, sha256: sha(png) });
    expect(document).toMatchObject({ filename: 'report.pdf', size: pdf.length, sha256: sha(pdf) });
  });

  it('an upload whose connection was reset is tried again and arrives whole, once', async () => {
    const pdf = randomBytes(50_000);
    writeFileSync(path.join(tmp.dir, 'notes.txt'), pdf);
    let cuts = 0;
    telegram.resetConnection = (method) => method === 'sendDocument' && ++cuts === 1;
    await channel!.send(dmTarget, { text: '', files: [{ path: path.join(tmp.dir, 'notes.txt'), name: 'notes.txt', mime: 'text/plain', size: pdf.length }] });
    expect(telegram.resets).toBe(1);
    const uploads = sends().filter((c) => c.method === 'sendDocument');
    expect(uploads).toHaveLength(1);
    expect((uploads[0]!.body.files as UploadedPart[])[0]).toMatchObject({ filename: 'notes.txt', sha256: sha(pdf) });
  });

  it('an image of 10 MB or more, or one Telegram refuses as a photo, goes as a document', async () => {
    const png = randomBytes(2048);
    writeFileSync(path.join(tmp.dir, 'huge.png'), png);
    writeFileSync(path.join(tmp.dir, 'odd.png'), png);
    telegram.failNext('sendPhoto', { error_code: 400, description: 'Bad Request: PHOTO_INVALID_DIMENSIONS' });
    await channel!.send(dmTarget, {
      text: '',
      files: [
        { path: path.join(tmp.dir, 'odd.png'), name: 'odd.png', mime: 'image/png', size: png.length },
        { path: path.join(tmp.dir, 'huge.png'), name: 'huge.png', mime: 'image/png', size: 10 * 1024 * 1024 },
      ],
    });
    expect(telegram.calls.filter((c) => c.method === 'sendPhoto' || c.method === 'sendDocument').map((c) => [c.method, c.response.ok, (c.body.files as UploadedPart[])[0]?.filename]))
      .toEqual([['sendPhoto', false, 'odd.png'], ['sendDocument', true, 'odd.png'], ['sendDocument', true, 'huge.png']]);
  });
});
