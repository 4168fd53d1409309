import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDiscordChannel } from '../../../channels/discord/index.ts';
import { isDiscordMediaUrl } from '../../../channels/discord/media.ts';
import type { ChannelAdapter, Submission } from '../../../src/core/channel-adapter.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { MediaFetchError } from '../../../src/core/errors.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import type { InboundMessage, MediaDownload } from '../../../src/core/message.ts';
import { startFakeDiscord, type FakeDiscord } from '../../fakes/fake-discord.ts';
import { until } from '../../helpers/wait.ts';
import { ids } from './setup.ts';

const accepted = (): Submission => ({ status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) });
const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const open = () => ({ signal: new AbortController().signal, maxBytes: 1_000_000 });

async function drain(download: MediaDownload): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of download.body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

describe('Discord media in (SPEC §15): attachments normalized through discord.js, fetched from the CDN URL only', () => {
  let discord: FakeDiscord;
  let adapter: ChannelAdapter;
  let received: InboundMessage[];
  let foreign: Server | undefined;

  beforeEach(async () => {
    discord = await startFakeDiscord({ bot: { id: ids.bot, username: 'switchboard', bot: true } });
    received = [];
    adapter = createDiscordChannel({
      account: { accountId: 'default', enabled: true, token: discord.token, apiBase: discord.api, dmPolicy: 'open', allowFrom: [], groupPolicy: 'open', groups: [], requireMention: true },
      clock: new ManualClock(), logger: silentLogger(), stateDir: '/nonexistent',
    });
    await adapter.start(async (message) => { received.push(message); return accepted(); });
  });
  afterEach(async () => {
    await adapter.stop();
    await discord.close();
    foreign?.closeAllConnections();
    await new Promise((resolve) => (foreign ? foreign.close(resolve) : resolve(undefined)));
    foreign = undefined;
  });

  const receive = async (fields: { content: string; attachments: Record<string, unknown>[]; flags?: number }) => {
    const before = received.length;
    discord.message({ channel_id: ids.dm, ...fields });
    await until(() => received.length > before, 'the message to reach the sink');
    return received.at(-1)!;
  };

  it('a photo with a caption, a voice message, a document and several attachments carry what Discord says of them', async () => {
    const photo = discord.addAttachment({ name: 'cat.png', bytes: randomBytes(10), contentType: 'image/png', width: 640, height: 480 });
    const withCaption = await receive({ content: 'my cat', attachments: [photo] });
    expect(withCaption.text).toBe('my cat');
    expect(withCaption.attachments).toStrictEqual([{ type: 'image', fileId: photo.id, url: photo.url, name: 'cat.png', mimeType: 'image/png', size: 10, width: 640, height: 480 }]);

    const voice = discord.addAttachment({ name: 'voice-message.ogg', bytes: randomBytes(20), contentType: 'audio/ogg', durationSecs: 7.5 });
    const note = await receive({ content: '', attachments: [voice], flags: 8192 });
    expect(note.attachments).toStrictEqual([{ type: 'voice', fileId: voice.id, url: voice.url, name: 'voice-message.ogg', mimeType: 'audio/ogg', size: 20, durationSeconds: 7.5 }]);

    const pdf = discord.addAttachment({ name: 'report.pdf', bytes: randomBytes(30), contentType: 'application/pdf' });
    const song = discord.addAttachment({ name: 'song.mp3', bytes: randomBytes(40), contentType: 'audio/mpeg' });
    const several = await receive({ content: 'both', attachments: [pdf, song] });
    expect(several.attachments.map((a) => [a.type, a.name, a.url])).toEqual([['file', 'report.pdf', pdf.url], ['audio', 'song.mp3', song.url]]);
  });

  it('fetchMedia streams the bytes the CDN URL served, with no token', async () => {
    const bytes = randomBytes(250_000);
    const file = discord.addAttachment({ name: 'big.bin', bytes, chunkBytes: 50_000 });
    const message = await receive({ content: 'here', attachments: [file] });
    const download = await adapter.fetchMedia!(message.attachments[0]!, open());
    expect(download.size).toBe(bytes.length);
    expect(sha(await drain(download))).toBe(sha(bytes));
    expect(discord.downloads).toMatchObject([{ status: 200, bytesSent: bytes.length }]);
    expect(discord.downloads[0]!.authorization).toBeUndefined();
  });

  it('refuses an announced oversize without downloading; 404 and 500 are download_failed', async () => {
    const big = discord.addAttachment({ name: 'big.bin', bytes: randomBytes(10), announcedSize: 5_000_000 });
    const message = await receive({ content: 'big', attachments: [big] });
    const refused = await adapter.fetchMedia!(message.attachments[0]!, open()).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MediaFetchError);
    expect((refused as MediaFetchError).reason).toBe('too_large');
    expect(discord.downloads).toHaveLength(0);
    for (const status of [404, 500]) {
      const failing = discord.addAttachment({ name: `f${status}.bin`, bytes: randomBytes(10), status });
      const error = await adapter.fetchMedia!({ type: 'file', fileId: String(failing.id), url: String(failing.url) }, open()).catch((e: unknown) => e);
      expect((error as MediaFetchError).reason).toBe('download_failed');
      expect((error as Error).message).toContain(String(status));
    }
  });

  it('never fetches a URL on a foreign host, nor follows a redirect to one', async () => {
    let hits = 0;
    foreign = createServer((_req, res) => { hits++; res.end('secret'); });
    await new Promise<void>((resolve) => foreign!.listen(0, '127.0.0.1', resolve));
    const elsewhere = `http://127.0.0.1:${(foreign.address() as AddressInfo).port}/x.png`;
    for (const url of [elsewhere, 'https://evil.example/cat.png', 'https://cdn.discordapp.com.evil.example/a.png', 'file:///etc/passwd']) {
      const error = await adapter.fetchMedia!({ type: 'image', fileId: '1', url }, open()).catch((e: unknown) => e);
      expect((error as MediaFetchError).reason, url).toBe('download_failed');
    }
    const redirecting = discord.addAttachment({ name: 'r.png', bytes: randomBytes(10), redirectTo: elsewhere });
    const error = await adapter.fetchMedia!({ type: 'image', fileId: '2', url: String(redirecting.url) }, open()).catch((e: unknown) => e);
    expect((error as MediaFetchError).reason).toBe('download_failed');
    expect(discord.downloads).toHaveLength(1);
    expect(hits).toBe(0);
    expect(isDiscordMediaUrl('https://cdn.discordapp.com/attachments/1/2/a.png', '')).toBe(true);
    expect(isDiscordMediaUrl('https://media.discordapp.net/attachments/1/2/a.png', '')).toBe(true);
    expect(isDiscordMediaUrl('http://cdn.discordapp.com/attachments/1/2/a.png', '')).toBe(false);
  });

  it('aborting the signal stops the download', async () => {
    const bytes = randomBytes(200_000);
    const file = discord.addAttachment({ name: 'slow.bin', bytes, chunkBytes: 10_000, chunkDelayMs: 30 });
    const controller = new AbortController();
    const download = await adapter.fetchMedia!({ type: 'file', fileId: String(file.id), url: String(file.url) }, { signal: controller.signal, maxBytes: 1_000_000 });
    const reading = drain(download).catch((e: unknown) => e);
    await until(() => (discord.downloads[0]?.bytesSent ?? 0) >= 30_000, 'part of the file to be sent');
    controller.abort();
    expect(await reading).toBeInstanceOf(Error);
    await until(() => discord.downloads[0]!.aborted, 'the fake to see the download stopped');
    expect(discord.downloads[0]!.bytesSent).toBeLessThan(bytes.length);
  });
});
