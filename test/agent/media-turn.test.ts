import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../src/main.ts';
import type { TranscriptEntry, TranscriptMessage } from '../../src/sessions/transcript.ts';
import { lastUser } from '../fakes/fake-openai.ts';
import { useFakeOpenAI, useTempDir } from '../helpers/fixtures.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { FileServingChannel } from '../helpers/file-serving-channel.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { until } from '../helpers/wait.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('media in a turn (SPEC §15)', () => {
  const tmp = useTempDir('switchboard-media-turn-');
  const openai = useFakeOpenAI();
  let gw: RunningGateway | undefined;
  afterEach(async () => { await gw?.stop(); gw = undefined; });

  let timers: ManualTimers;
  async function start(overrides: Record<string, unknown> = {}, model = 'gpt-4o') {
    const channel = new FileServingChannel();
    timers = new ManualTimers();
    gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel], mediaTimers: timers,
      config: {
        providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model, maxRetries: 0 } },
        channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } }, ...overrides,
      },
    });
    return channel;
  }

  async function userEntries(): Promise<TranscriptMessage[]> {
    const entry = await gw!.sessions.get('agent:main:main');
    const entries: TranscriptEntry[] = await gw!.transcripts.read(entry!.sessionId);
    return entries.filter((e): e is TranscriptMessage => e.type === 'message' && e.role === 'user');
  }

  it('a photo with a caption reaches a model that sees as a downscaled image part after the caption, and the entry records it', async () => {
    const channel = await start();
    const photo = await sharp({ create: { width: 3000, height: 1500, channels: 3, background: '#3366cc' } }).jpeg().toBuffer();
    channel.files.set('photo-1', photo);
    await channel.inject('what is this?', { attachments: [{ type: 'photo', fileId: 'photo-1', mimeType: 'image/jpeg', size: photo.length }] });
    await channel.waitForSent(1);
    const request = openai.requests.at(-1)!;
    expect(lastUser(request)).toContain('what is this?');
    expect(request.images).toHaveLength(1);
    const image = request.images[0]!;
    expect(image.mime).toBe('image/jpeg');
    const shown = await sharp(Buffer.from(image.url.split(',')[1]!, 'base64')).metadata();
    expect([shown.width, shown.height]).toEqual([2048, 1024]);

    const [user] = await userEntries();
    expect(user!.media).toHaveLength(1);
    expect(user!.media![0]).toMatchObject({ kind: 'image', mime: 'image/jpeg', size: photo.length, sha256: sha(photo), as: 'image', width: 3000, height: 1500 });
    // The original is in the media store, under its hash.
    expect(readFileSync(path.join(gw!.config.stateDir, 'media', sha(photo)))).toEqual(photo);
  });

  it('images count in the request estimate as their own component', async () => {
    const channel = await start();
    const photo = await sharp({ create: { width: 1024, height: 1024, channels: 3, background: '#ffffff' } }).png().toBuffer();
    channel.files.set('p', photo);
    await channel.inject('look', { attachments: [{ type: 'photo', fileId: 'p' }] });
    await channel.waitForSent(1);
    await channel.inject('/context');
    await channel.waitForSent(2);
    // OpenAI's tile rule: 1024×1024 → 768×768 → 4 tiles × 170 + 85 = 765.
    expect(channel.texts()[1]).toContain('images 765');
  });

  it('a compaction turns the images before it into their lines; images sent after it are shown', async () => {
    const channel = await start({ agents: { defaults: { compaction: { keepRecentTokens: 0 } } } });
    const first = await sharp({ create: { width: 800, height: 600, channels: 3, background: '#ff0000' } }).jpeg().toBuffer();
    const second = await sharp({ create: { width: 640, height: 480, channels: 3, background: '#00ff00' } }).jpeg().toBuffer();
    channel.files.set('a', first);
    channel.files.set('b', second);
    await channel.inject('first', { attachments: [{ type: 'photo', fileId: 'a' }] });
    await channel.waitForSent(1);
    expect(openai.requests.at(-1)!.images).toHaveLength(1);
    await channel.inject('/compact');
    await channel.waitForSent(2);
    expect(channel.texts()[1]).toMatch(/compact/i);
    await channel.inject('second', { attachments: [{ type: 'photo', fileId: 'b' }] });
    await channel.waitForSent(3);
    const request = openai.requests.at(-1)!;
    // Only the image sent after the compaction is an image; the first one is its line (in the summary and the kept text).
    expect(request.images).toHaveLength(1);
    const shown = await sharp(Buffer.from(request.images[0]!.url.split(',')[1]!, 'base64')).metadata();
    expect([shown.width, shown.height]).toEqual([640, 480]);
    expect(JSON.stringify(request.body)).toContain('[image: image/jpeg 800×600');
    // The summary request repeats the turn's prefix, image included, and names the line the image becomes.
    const summaryCall = openai.requests.find((r) => lastUser(r).includes('[Compaction request]'));
    expect(summaryCall).toBeDefined();
    expect(summaryCall!.images.map((i) => i.url)).toEqual(openai.requests[0]!.images.map((i) => i.url));
    expect(lastUser(summaryCall!)).toMatch(/each replaced by its line: \[image: image\/jpeg 800×600/);
  });

  it("a session's token budget counts the images a request would carry (SPEC §14, §15)", async () => {
    const channel = await start({ session: { tokenBudget: 2500 } });
    const square = await sharp({ create: { width: 1024, height: 1024, channels: 3, background: '#999999' } }).png().toBuffer();
    for (const id of ['a', 'b', 'c', 'd']) channel.files.set(id, square);
    // The words alone fit.
    await channel.inject('compare these');
    await channel.waitForSent(1);
    expect(openai.requests).toHaveLength(1);
    // With four images at 765 tokens each (OpenAI's tile rule) the request is over what is left: refused before any call.
    await channel.inject('compare these', { attachments: ['a', 'b', 'c', 'd'].map((fileId) => ({ type: 'photo' as const, fileId })) });
    await channel.waitForSent(2);
    expect(openai.requests).toHaveLength(1);
    expect(channel.texts()[1]).toMatch(/budget/i);
  });

  it('with vision off the model gets the image line instead', async () => {
    const channel = await start({ agents: { defaults: { vision: 'off' } } });
    const photo = await sharp({ create: { width: 1280, height: 720, channels: 3, background: '#000000' } }).jpeg().toBuffer();
    channel.files.set('p', photo);
    await channel.inject('hi', { attachments: [{ type: 'photo', fileId: 'p' }] });
    await channel.waitForSent(1);
    const request = openai.requests.at(-1)!;
    expect(request.images).toHaveLength(0);
    expect(lastUser(request)).toMatch(/\[image: image\/jpeg 1280×720, [\d.]+ KB\]/);
  });

  it('a model not known to see gets the line under vision auto', async () => {
    const channel = await start({}, 'llama-3-8b');
    const photo = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#000000' } }).jpeg().toBuffer();
    channel.files.set('p', photo);
    await channel.inject('hi', { attachments: [{ type: 'photo', fileId: 'p' }] });
    await channel.waitForSent(1);
    expect(openai.requests.at(-1)!.images).toHaveLength(0);
    expect(lastUser(openai.requests.at(-1)!)).toContain('[image: image/jpeg 64×64');
  });

  it('a voice note is transcribed and its transcript is the message (a spoken /new resets the session)', async () => {
    const channel = await start();
    const ogg = Buffer.concat([Buffer.from('OggS'), Buffer.alloc(2000, 7)]);
    channel.files.set('v1', ogg);
    openai.transcriptionScript.push({ text: 'book a table for two' });
    await channel.inject('', { attachments: [{ type: 'voice', fileId: 'v1', mimeType: 'audio/ogg', durationSeconds: 12 }] });
    await channel.waitForSent(1);
    expect(openai.transcriptions).toHaveLength(1);
    expect(openai.transcriptions[0]!.file.size).toBe(ogg.length);
    expect(lastUser(openai.requests.at(-1)!)).toContain('book a table for two');
    const [user] = await userEntries();
    expect(user!.media![0]).toMatchObject({ kind: 'voice', as: 'transcript' });

    const before = (await gw!.sessions.get('agent:main:main'))!.sessionId;
    channel.files.set('v2', ogg);
    openai.transcriptionScript.push({ text: '/new' });
    await channel.inject('', { attachments: [{ type: 'voice', fileId: 'v2', mimeType: 'audio/ogg' }] });
    await channel.waitForSent(2);
    expect(channel.texts()[1]).toContain('New session started');
    expect((await gw!.sessions.get('agent:main:main'))!.sessionId).not.toBe(before);
  });

  it('a transcription that fails becomes a line and the message is still answered', async () => {
    const channel = await start();
    channel.files.set('v', Buffer.concat([Buffer.from('OggS'), Buffer.alloc(100)]));
    openai.transcriptionScript.push({ status: 500 });
    await channel.inject('', { attachments: [{ type: 'voice', fileId: 'v', mimeType: 'audio/ogg', durationSeconds: 12 }] });
    await channel.waitForSent(1);
    expect(lastUser(openai.requests.at(-1)!)).toContain('[voice note, 12 s: could not be transcribed]');
    expect(channel.texts()[0]).toMatch(/^echo:/);
  });

  it('a text document is inlined with its name; a PDF with a lying mime type is read as what its bytes are', async () => {
    const channel = await start();
    channel.files.set('csv', Buffer.from('name,qty\napples,3\n'));
    channel.files.set('zip', Buffer.concat([Buffer.from('PK\u0003\u0004'), Buffer.alloc(50)]));
    await channel.inject('sum it', { attachments: [
      { type: 'document', fileId: 'csv', name: 'stock.csv', mimeType: 'text/csv' },
      { type: 'document', fileId: 'zip', name: 'photo.jpg', mimeType: 'image/jpeg' },
    ] });
    await channel.waitForSent(1);
    const text = lastUser(openai.requests.at(-1)!);
    expect(text).toContain('stock.csv');
    expect(text).toContain('apples,3');
    expect(text).toContain('[file: photo.jpg, application/zip');
    expect(openai.requests.at(-1)!.images).toHaveLength(0);
  });

  it('bad media never costs the message: too large (not fetched), failed, timed out and undecodable become lines', async () => {
    const channel = await start({ media: { maxBytes: 4096, downloadTimeoutSeconds: 30 } });
    channel.files.set('big', Buffer.alloc(10));
    channel.files.set('broken', Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(300, 1)]));
    channel.files.set('slow', 'hang');
    channel.files.set('gone', 'fail');
    await channel.inject('here', { attachments: [
      { type: 'document', fileId: 'big', name: 'huge.bin', size: 50_000 },
      { type: 'document', fileId: 'gone', name: 'gone.pdf', mimeType: 'application/pdf' },
      { type: 'photo', fileId: 'slow' },
      { type: 'photo', fileId: 'broken', mimeType: 'image/jpeg' },
    ] });
    await until(() => channel.fetched.includes('slow'), 'the slow download to start');
    // Every download gets its own deadline: the hanging one is cut when its 30 s are up.
    expect(timers.delays()).toEqual([30_000]);
    timers.advance(30_000);
    await channel.waitForSent(1);
    expect(channel.fetched).not.toContain('big');
    const text = lastUser(openai.requests.at(-1)!);
    expect(text).toContain('[file too large: huge.bin');
    expect(text).toMatch(/gone\.pdf.*could not be downloaded/);
    expect(text).toMatch(/timed out|took too long/);
    expect(text).toMatch(/could not be (read|decoded)/);
    expect(channel.texts()[0]).toMatch(/^echo:/);
    const [user] = await userEntries();
    expect(user!.media!.map((m) => m.problem)).toEqual(['too_large', 'download_failed', 'timeout', 'undecodable']);
  });
});
