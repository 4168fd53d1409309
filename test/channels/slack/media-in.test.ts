import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSlackChannel } from '../../../channels/slack/index.ts';
import { isSlackFileUrl } from '../../../channels/slack/media.ts';
import type { ChannelAdapter, Submission } from '../../../src/core/channel-adapter.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { MediaFetchError } from '../../../src/core/errors.ts';
import type { InboundMessage, MediaDownload } from '../../../src/core/message.ts';
import { dmEvent, eventCallback, startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { until } from '../../helpers/wait.ts';
import { APP_TOKEN, BOT_TOKEN, capturingLogger, SIGNING_SECRET } from './helpers.ts';

const accepted = (): Submission => ({ status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) });
const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const open = () => ({ signal: new AbortController().signal, maxBytes: 1_000_000 });

async function drain(download: MediaDownload): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of download.body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

describe('Slack media in (SPEC §15): files normalized through bolt, fetched from url_private with the bot token', () => {
  let slack: FakeSlack;
  let adapter: ChannelAdapter;
  let received: InboundMessage[];
  let foreign: Server | undefined;
  let log: ReturnType<typeof capturingLogger>;

  beforeEach(async () => {
    slack = await startFakeSlack({ appToken: APP_TOKEN, botToken: BOT_TOKEN });
    received = [];
    log = capturingLogger();
    adapter = createSlackChannel({
      account: { accountId: 'default', enabled: true, dmPolicy: 'open', allowFrom: [], groupPolicy: 'open', groups: [], requireMention: true, botToken: BOT_TOKEN, appToken: APP_TOKEN, signingSecret: SIGNING_SECRET, apiUrl: slack.apiUrl, mode: 'socket' },
      clock: systemClock, logger: log.logger, stateDir: '/nonexistent',
    });
    await adapter.start(async (message) => { received.push(message); return accepted(); });
    await slack.waitForSocket();
  });
  afterEach(async () => {
    await adapter.stop();
    await slack.close();
    foreign?.closeAllConnections();
    await new Promise((resolve) => (foreign ? foreign.close(resolve) : resolve(undefined)));
    foreign = undefined;
  });

  const receive = async (text: string, files: Record<string, unknown>[]) => {
    const before = received.length;
    await slack.sendEnvelope(eventCallback({ ...dmEvent(text), subtype: 'file_share', files }));
    await until(() => received.length > before, 'the message to reach the sink');
    return received.at(-1)!;
  };

  it('a photo with a caption (file_share), a voice clip, a document and several files carry what Slack says of them', async () => {
    const photo = slack.addFile({ name: 'cat.png', bytes: randomBytes(10), mimetype: 'image/png', originalW: 800, originalH: 600 });
    const withCaption = await receive('my cat', [photo]);
    expect(withCaption.text).toBe('my cat');
    expect(withCaption.attachments).toStrictEqual([{ type: 'image', fileId: photo.id, url: photo.url_private, name: 'cat.png', mimeType: 'image/png', size: 10, width: 800, height: 600 }]);

    const clip = slack.addFile({ name: 'audio_message.m4a', bytes: randomBytes(20), mimetype: 'audio/mp4', durationMs: 4500, subtype: 'slack_audio' });
    const voice = await receive('', [clip]);
    expect(voice.attachments).toStrictEqual([{ type: 'voice', fileId: clip.id, url: clip.url_private, name: 'audio_message.m4a', mimeType: 'audio/mp4', size: 20, durationSeconds: 4.5 }]);

    const pdf = slack.addFile({ name: 'report.pdf', bytes: randomBytes(30), mimetype: 'application/pdf' });
    const song = slack.addFile({ name: 'song.mp3', bytes: randomBytes(40), mimetype: 'audio/mpeg' });
    const several = await receive('both', [pdf, song]);
    expect(several.attachments.map((a) => [a.type, a.name, a.url])).toEqual([['file', 'report.pdf', pdf.url_private], ['audio', 'song.mp3', song.url_private]]);
  });

  it('fetchMedia streams the bytes of url_private, sent with the bot token', async () => {
    const bytes = randomBytes(220_000);
    const file = slack.addFile({ name: 'data.bin', bytes, mimetype: 'application/octet-stream', chunkBytes: 40_000 });
    const message = await receive('', [file]);
    const download = await adapter.fetchMedia!(message.attachments[0]!, open());
    expect(sha(await drain(download))).toBe(sha(bytes));
    expect(slack.downloads).toMatchObject([{ status: 200, authorization: `Bearer ${BOT_TOKEN}`, bytesSent: bytes.length }]);
  });

  it('a file shared from another workspace (no url_private in the event) is found with files.info', async () => {
    const bytes = randomBytes(5000);
    const { url_private: _url, url_private_download: _download, ...file } = slack.addFile({ name: 'shared.txt', bytes, mimetype: 'text/plain' });
    const message = await receive('', [{ ...file, file_access: 'check_file_info' }]);
    expect(message.attachments[0]!.url).toBeUndefined();
    const download = await adapter.fetchMedia!(message.attachments[0]!, open());
    expect(sha(await drain(download))).toBe(sha(bytes));
    expect(slack.callsOf('files.info').map((c) => c.body.file)).toEqual([file.id]);
  });

  it('refuses an announced oversize without downloading; 404 and 500 are download_failed', async () => {
    const big = slack.addFile({ name: 'big.bin', bytes: randomBytes(10), announcedSize: 9_000_000 });
    const refused = await adapter.fetchMedia!({ type: 'file', fileId: String(big.id), url: String(big.url_private), size: Number(big.size) }, open()).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MediaFetchError);
    expect((refused as MediaFetchError).reason).toBe('too_large');
    expect(slack.downloads).toHaveLength(0);
    for (const status of [404, 500]) {
      const failing = slack.addFile({ name: 'f.bin', bytes: randomBytes(10), status });
      const error = await adapter.fetchMedia!({ type: 'file', fileId: String(failing.id), url: String(failing.url_private) }, open()).catch((e: unknown) => e);
      expect((error as MediaFetchError).reason).toBe('download_failed');
      expect((error as Error).message).toContain(String(status));
    }
  });

  it('never sends the token to a foreign host: not for a foreign url_private, not after a redirect', async () => {
    const seen: IncomingHttpHeaders[] = [];
    foreign = createServer((req, res) => { seen.push(req.headers); res.end('secret'); });
    await new Promise<void>((resolve) => foreign!.listen(0, '127.0.0.1', resolve));
    const elsewhere = `http://127.0.0.1:${(foreign.address() as AddressInfo).port}/files-pri/T1-F1/x.png`;
    for (const url of [elsewhere, 'https://files.slack.com.evil.example/x', 'https://evil.example/files-pri/x']) {
      const error = await adapter.fetchMedia!({ type: 'image', fileId: 'F1', url }, open()).catch((e: unknown) => e);
      expect((error as MediaFetchError).reason, url).toBe('download_failed');
    }
    const redirecting = slack.addFile({ name: 'r.png', bytes: randomBytes(10), redirectTo: elsewhere });
    const error = await adapter.fetchMedia!({ type: 'image', fileId: String(redirecting.id), url: String(redirecting.url_private) }, open()).catch((e: unknown) => e);
    expect((error as MediaFetchError).reason).toBe('download_failed');
    expect(seen).toEqual([]);
    expect(isSlackFileUrl('https://files.slack.com/files-pri/T1-F1/a.png', '')).toBe(true);
    expect(isSlackFileUrl('http://files.slack.com/files-pri/T1-F1/a.png', '')).toBe(false);
    expect(JSON.stringify(log.lines())).not.toContain(BOT_TOKEN);
  });

  it('aborting the signal stops the download', async () => {
    const bytes = randomBytes(200_000);
    const file = slack.addFile({ name: 'slow.bin', bytes, chunkBytes: 10_000, chunkDelayMs: 30 });
    const controller = new AbortController();
    const download = await adapter.fetchMedia!({ type: 'file', fileId: String(file.id), url: String(file.url_private) }, { signal: controller.signal, maxBytes: 1_000_000 });
    const reading = drain(download).catch((e: unknown) => e);
    await until(() => (slack.downloads[0]?.bytesSent ?? 0) >= 30_000, 'part of the file to be sent');
    controller.abort();
    expect(await reading).toBeInstanceOf(Error);
    await until(() => slack.downloads[0]!.aborted, 'the fake to see the download stopped');
    expect(slack.downloads[0]!.bytesSent).toBeLessThan(bytes.length);
  });
});
