import { createHash, randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramChannel } from '../../../channels/telegram/index.ts';
import type { ChannelAdapter, Submission } from '../../../src/core/channel-adapter.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { MediaFetchError } from '../../../src/core/errors.ts';
import type { InboundMessage, MediaDownload } from '../../../src/core/message.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { tempDir, testConfig } from '../../helpers/gateway.ts';
import { capturingLogger } from '../../helpers/log-capture.ts';
import { until } from '../../helpers/wait.ts';
import { telegramConfig } from './harness.ts';
import { dm } from './updates.ts';

const accepted = (): Submission => ({ status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) });
const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** Reads a download to its end. */
async function drain(download: MediaDownload): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of download.body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** A private message from Alice with media fields instead of text. */
function mediaDm(fields: Record<string, unknown>) {
  const { text: _text, entities: _entities, ...message } = dm('x').message as Record<string, unknown>;
  return { message: { ...message, ...fields } };
}

describe('Telegram media in (SPEC §15): normalized through grammy, fetched with getFile and the file URL', () => {
  let telegram: FakeTelegram;
  let tmp: ReturnType<typeof tempDir>;
  let channel: ChannelAdapter | undefined;
  let received: InboundMessage[];
  let log: ReturnType<typeof capturingLogger>;

  beforeEach(async () => {
    telegram = await startFakeTelegram();
    tmp = tempDir();
    received = [];
    log = capturingLogger('debug');
    const config = testConfig(tmp.dir, telegramConfig(), { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    channel = createTelegramChannel({ account: config.channels.telegram[0]!, clock: systemClock, logger: log.logger, stateDir: config.stateDir });
    await channel.start(async (message) => { received.push(message); return accepted(); });
  });
  afterEach(async () => {
    await channel?.stop();
    channel = undefined;
    await telegram.close();
    tmp.remove();
  });

  const receive = async (update: Record<string, unknown>) => {
    const before = received.length;
    telegram.pushUpdate(update);
    await until(() => received.length > before, 'the update to reach the sink');
    return received.at(-1)!;
  };

  it('a photo with a caption: the caption is the text, the largest size the attachment with its pixels and size', async () => {
    const message = await receive(mediaDm({
      caption: 'my cat',
      photo: [
        { file_id: 'small', file_unique_id: 's', width: 90, height: 60, file_size: 1200 },
        { file_id: 'large', file_unique_id: 'l', width: 1280, height: 853, file_size: 98_765 },
      ],
    }));
    expect(message.text).toBe('my cat');
    expect(message.attachments).toStrictEqual([{ type: 'photo', fileId: 'large', mimeType: 'image/jpeg', size: 98_765, width: 1280, height: 853 }]);
  });

  it('a voice note carries its duration and mime type; a document its name; several media in one message are all listed', async () => {
    const voice = await receive(mediaDm({ voice: { file_id: 'v1', file_unique_id: 'v', duration: 12, mime_type: 'audio/ogg', file_size: 4567 } }));
    expect(voice.text).toBe('');
    expect(voice.attachments).toStrictEqual([{ type: 'voice', fileId: 'v1', mimeType: 'audio/ogg', size: 4567, durationSeconds: 12 }]);

    const document = await receive(mediaDm({ caption: 'the report', document: { file_id: 'd1', file_unique_id: 'd', file_name: 'report.pdf', mime_type: 'application/pdf', file_size: 321 } }));
    expect(document.attachments).toStrictEqual([{ type: 'document', fileId: 'd1', name: 'report.pdf', mimeType: 'application/pdf', size: 321 }]);

    const several = await receive(mediaDm({
      caption: 'all of it',
      photo: [{ file_id: 'p1', file_unique_id: 'p', width: 10, height: 20, file_size: 30 }],
      audio: { file_id: 'a1', file_unique_id: 'a', duration: 200, title: 'Song', mime_type: 'audio/mpeg', file_size: 40 },
      video_note: { file_id: 'n1', file_unique_id: 'n', length: 240, duration: 9, file_size: 50 },
    }));
    expect(several.attachments).toStrictEqual([
      { type: 'photo', fileId: 'p1', mimeType: 'image/jpeg', size: 30, width: 10, height: 20 },
      { type: 'audio', fileId: 'a1', name: 'Song', mimeType: 'audio/mpeg', size: 40, durationSeconds: 200 },
      { type: 'video', fileId: 'n1', mimeType: 'video/mp4', size: 50, durationSeconds: 9, width: 240, height: 240 },
    ]);
  });

  it('fetchMedia streams the bytes the file URL served (getFile, then GET /file/bot<token>/<path>)', async () => {
    const bytes = randomBytes(300_000);
    const fileId = telegram.addFile({ bytes, path: 'photos/file_7.jpg', contentType: 'image/jpeg', chunkBytes: 64 * 1024 });
    const download = await channel!.fetchMedia!({ type: 'photo', fileId }, { signal: new AbortController().signal, maxBytes: 1_000_000 });
    expect(download.size).toBe(bytes.length);
    expect(download.mime).toBe('image/jpeg');
    expect(sha(await drain(download))).toBe(sha(bytes));
    expect(telegram.callsOf('getFile').map((c) => c.body.file_id)).toEqual([fileId]);
    expect(telegram.downloads).toMatchObject([{ path: 'photos/file_7.jpg', authorized: true, status: 200, bytesSent: bytes.length }]);
  });

  it('a file over maxBytes, as the message or getFile announces it, is refused without downloading it', async () => {
    const fileId = telegram.addFile({ bytes: randomBytes(5000) });
    const small = { signal: new AbortController().signal, maxBytes: 4000 };
    // Announced by the message: not even getFile.
    const byMessage = await channel!.fetchMedia!({ type: 'document', fileId, size: 5000 }, small).catch((e: unknown) => e);
    expect(byMessage).toBeInstanceOf(MediaFetchError);
    expect((byMessage as MediaFetchError).reason).toBe('too_large');
    expect(telegram.callsOf('getFile')).toHaveLength(0);
    // Announced by getFile only.
    const byGetFile = await channel!.fetchMedia!({ type: 'document', fileId }, small).catch((e: unknown) => e);
    expect((byGetFile as MediaFetchError).reason).toBe('too_large');
    // Over Telegram's 20 MB: getFile itself refuses ("file is too big").
    const huge = telegram.addFile({ bytes: randomBytes(10), announcedSize: 25 * 1024 * 1024 });
    const refused = await channel!.fetchMedia!({ type: 'video', fileId: huge }, { signal: new AbortController().signal, maxBytes: 50 * 1024 * 1024 }).catch((e: unknown) => e);
    expect((refused as MediaFetchError).reason).toBe('too_large');
    expect(telegram.downloads).toHaveLength(0);
  });

  it('a 404 or 500 of the file URL, an unknown file id or a download that breaks off is download_failed; the token is in no error or log line', async () => {
    const options = { signal: new AbortController().signal, maxBytes: 1_000_000 };
    const failures: unknown[] = [];
    for (const status of [404, 500]) {
      const fileId = telegram.addFile({ bytes: randomBytes(10), status });
      failures.push(await channel!.fetchMedia!({ type: 'document', fileId }, options).catch((e: unknown) => e));
    }
    failures.push(await channel!.fetchMedia!({ type: 'document', fileId: 'no-such-file' }, options).catch((e: unknown) => e));
    const cut = telegram.addFile({ bytes: randomBytes(100_000), cutAfterBytes: 20_000, chunkBytes: 10_000 });
    const download = await channel!.fetchMedia!({ type: 'document', fileId: cut }, options);
    failures.push(await drain(download).catch((e: unknown) => e));
    for (const failure of failures) {
      expect(failure).toBeInstanceOf(MediaFetchError);
      expect((failure as MediaFetchError).reason).toBe('download_failed');
      expect(`${(failure as Error).message} ${JSON.stringify((failure as Error).cause ?? null)}`).not.toContain(telegram.token);
    }
    expect((failures[0] as Error).message).toMatch(/404/);
    expect(JSON.stringify(log.lines)).not.toContain(telegram.token);
  });

  it('aborting the signal stops a slow download: the fake sees the client go before the whole file', async () => {
    const bytes = randomBytes(200_000);
    const fileId = telegram.addFile({ bytes, chunkBytes: 10_000, chunkDelayMs: 30 });
    const controller = new AbortController();
    const download = await channel!.fetchMedia!({ type: 'document', fileId }, { signal: controller.signal, maxBytes: 1_000_000 });
    const reading = drain(download).catch((e: unknown) => e);
    await until(() => (telegram.downloads[0]?.bytesSent ?? 0) >= 30_000, 'part of the file to be sent');
    controller.abort();
    expect(await reading).toBeInstanceOf(Error);
    await until(() => telegram.downloads[0]!.aborted, 'the fake to see the download stopped');
    expect(telegram.downloads[0]!.bytesSent).toBeLessThan(bytes.length);
  });
});
