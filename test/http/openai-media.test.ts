import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { auth, pngBytes, startMediaWorld, type MediaWorld } from './media-harness.ts';

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const dataUrl = (bytes: Buffer, mime = 'image/png') => `data:${mime};base64,${bytes.toString('base64')}`;
const errorOf = async (r: Response) => ((await r.json()) as { error: { code: string; message: string } }).error;
const user = (content: unknown) => ({ role: 'user', content });
const image = (url: string) => ({ type: 'image_url', image_url: { url } });

/** `/v1/chat/completions` with `image_url` parts (SPEC §15): data URLs stored, https URLs passed through unfetched. */
describe('OpenAI API images', () => {
  let world: MediaWorld;
  beforeEach(async () => { world = await startMediaWorld({ maxBytes: 64 * 1024 }); });
  afterEach(async () => { await world.close(); });
  const complete = (messages: unknown[]) => world.post('/v1/chat/completions', { model: 'main', messages });

  it('a data: URL image is decoded and stored; the turn gets an attachment with its sha256, beside the text', async () => {
    const png = pngBytes(5000);
    const response = await complete([user([{ type: 'text', text: 'what is this?' }, image(dataUrl(png))])]);
    expect(response.status).toBe(200);
    expect(((await response.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe('ok');
    const [message] = world.received;
    expect(message!.text).toBe('what is this?');
    expect(message!.attachments).toEqual([{ type: 'image', fileId: `media:${sha(png)}`, sha256: sha(png), name: 'image-1.png', mimeType: 'image/png', size: png.length }]);
    const served = await world.app.request(`/media/${sha(png)}`, { headers: auth });
    expect(Buffer.from(await served.arrayBuffer()).equals(png)).toBe(true);
  });

  it('an image alone (no text) is a turn; image_url may be the URL itself', async () => {
    const png = pngBytes(100);
    expect((await complete([user([{ type: 'image_url', image_url: dataUrl(png, 'image/svg+xml') }])])).status).toBe(200);
    expect(world.received[0]!.text).toBe('');
    expect(world.received[0]!.attachments[0]).toMatchObject({ sha256: sha(png), mimeType: 'image/svg+xml', name: 'image-1.svg' });
  });

  describe('an https: URL', () => {
    let server: Server;
    let connections = 0;
    beforeEach(async () => {
      connections = 0;
      server = createServer((socket) => { connections++; socket.destroy(); });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    });
    afterEach(async () => { await new Promise((resolve) => server.close(resolve)); });

    it('is passed through to the model and never fetched by the gateway', async () => {
      const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/cat.png?size=large`;
      const response = await complete([user([{ type: 'text', text: 'a cat' }, image(url)])]);
      expect(response.status).toBe(200);
      expect(world.received[0]!.attachments).toEqual([{ type: 'image', fileId: 'url', passThroughUrl: url, name: 'cat.png' }]);
      expect(world.store.puts).toBe(0);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(connections).toBe(0);
    });
  });

  it('other schemes, non-base64 or non-image data URLs, and parts without a URL are 400s; nothing is stored', async () => {
    const cases: [unknown, string][] = [
      [image('ftp://example.com/a.png'), 'invalid_image_url'], [image('file:///etc/passwd'), 'invalid_image_url'],
      [image('http://example.com/a.png'), 'invalid_image_url'], [image('javascript:alert(1)'), 'invalid_image_url'],
      [image('/relative.png'), 'invalid_image_url'], [image('https://'), 'invalid_image_url'],
      [image('data:image/png,%89PNG'), 'invalid_image_url'], [image(`data:text/html;base64,${Buffer.from('<script>').toString('base64')}`), 'invalid_image_url'],
      [{ type: 'image_url', image_url: {} }, 'invalid_value'], [{ type: 'image_url' }, 'missing_required_parameter'],
      [image('data:image/png;base64,@@@@'), 'invalid_base64'],
    ];
    for (const [part, code] of cases) {
      const response = await complete([user([{ type: 'text', text: 'see' }, part])]);
      expect(response.status, JSON.stringify(part)).toBe(400);
      expect((await errorOf(response)).code, JSON.stringify(part)).toBe(code);
    }
    expect(world.store.puts).toBe(0);
    expect(world.received).toHaveLength(0);
  });

  it('an image over media.maxBytes is a 413; more than ten images a 400', async () => {
    const big = await complete([user([image(dataUrl(Buffer.alloc(64 * 1024 + 1, 3)))])]);
    expect(big.status).toBe(413);
    expect((await errorOf(big)).code).toBe('attachment_too_large');
    const many = await complete([user(Array.from({ length: 11 }, () => image(dataUrl(pngBytes(50)))))]);
    expect(many.status).toBe(400);
    expect((await errorOf(many)).code).toBe('too_many_attachments');
    expect(world.store.puts).toBe(0);
  });

  it('only the last user message\'s images are the turn\'s: earlier ones are neither stored nor handed on', async () => {
    const old = pngBytes(200);
    const now = pngBytes(300);
    const response = await complete([
      user([{ type: 'text', text: 'old' }, image(dataUrl(old)), image('ftp://not.checked/either')]),
      { role: 'assistant', content: 'seen' },
      user([{ type: 'text', text: 'new' }, image(dataUrl(now))]),
    ]);
    expect(response.status).toBe(200);
    expect(world.received[0]!.attachments.map((a) => a.sha256)).toEqual([sha(now)]);
    expect(await world.store.stat(sha(old))).toBeUndefined();
  });
});
