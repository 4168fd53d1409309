import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { useTempDir } from '../helpers/fixtures.ts';
import { auth, pngBytes, startMediaWorld, type MediaWorld } from './media-harness.ts';

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const b64 = (bytes: Buffer) => bytes.toString('base64');
const errorOf = async (r: Response) => ((await r.json()) as { error: { code: string; message: string } }).error;
const PDF = Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');

/** `POST /webchat/messages` with attachments (SPEC §15): stored by hash, handed on, served back under auth. */
describe('web chat attachments', () => {
  let world: MediaWorld;
  const temp = useTempDir('switchboard-webchat-media-');
  beforeEach(async () => { world = await startMediaWorld({ maxBytes: 64 * 1024, maxBodyBytes: 32 * 1024 }); });
  afterEach(async () => { await world.close(); });

  it('an image and a PDF are stored; the runtime gets attachments whose sha256 is the bytes\'; /media serves them back', async () => {
    const png = pngBytes(40 * 1024);
    const response = await world.post('/webchat/messages', {
      user: 'ann', text: 'look at these',
      attachments: [{ name: 'photo.png', mime: 'image/png', dataBase64: b64(png) }, { name: '../../etc/report "final".pdf', mime: 'application/pdf; name=x', dataBase64: b64(PDF) }],
    });
    expect(response.status).toBe(200);
    const answer = await response.json() as { reply: string; attachments: { name: string; sha256: string; url: string }[] };
    expect(answer.reply).toBe('ok');
    const [message] = world.received;
    expect(message!.text).toBe('look at these');
    expect(message!.attachments).toEqual([
      { type: 'image', fileId: `media:${sha(png)}`, sha256: sha(png), name: 'photo.png', mimeType: 'image/png', size: png.length },
      { type: 'file', fileId: `media:${sha(PDF)}`, sha256: sha(PDF), name: 'report _final_.pdf', mimeType: 'application/pdf', size: PDF.length },
    ]);
    expect(answer.attachments.map((a) => a.url)).toEqual([`/media/${sha(png)}?name=photo.png`, `/media/${sha(PDF)}?name=report%20_final_.pdf`]);

    const image = await world.app.request(answer.attachments[0]!.url, { headers: auth });
    expect(image.status).toBe(200);
    expect(Buffer.from(await image.arrayBuffer()).equals(png)).toBe(true);
    expect(image.headers.get('content-type')).toBe('image/png');
    expect(image.headers.get('content-length')).toBe(String(png.length));
    expect(image.headers.get('content-disposition')).toMatch(/^inline; filename="photo.png"/);
    expect(image.headers.get('x-content-type-options')).toBe('nosniff');
    expect(image.headers.get('content-security-policy')).toMatch(/^sandbox/);
    expect(image.headers.get('cache-control')).toMatch(/^private, max-age=\d+, immutable$/);

    const pdf = await world.app.request(`/media/${sha(PDF)}?name=${encodeURIComponent('../a"b\u202e.pdf')}`, { headers: auth });
    expect(Buffer.from(await pdf.arrayBuffer()).equals(PDF)).toBe(true);
    expect(pdf.headers.get('content-disposition')).toBe('attachment; filename="a_b_.pdf"; filename*=UTF-8\'\'a_b_.pdf');
    expect(pdf.headers.get('content-security-policy')).toMatch(/^sandbox/);
  });

  it('/media needs the same auth as every route: 401 without it; 404 for an unknown or malformed hash; 304 for its ETag', async () => {
    const png = pngBytes();
    await world.post('/webchat/messages', { user: 'ann', attachments: [{ name: 'a.png', mime: 'image/png', dataBase64: b64(png) }] });
    const unauthenticated = await world.app.request(`/media/${sha(png)}`);
    expect(unauthenticated.status).toBe(401);
    expect(await unauthenticated.text()).not.toContain('PNG');
    expect((await world.app.request(`/media/${sha(png)}`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await world.app.request(`/media/${'0'.repeat(64)}`, { headers: auth })).status).toBe(404);
    expect((await world.app.request(`/media/${sha(png).toUpperCase()}x`, { headers: auth })).status).toBe(404);
    expect((await world.app.request('/media/..%2F..%2Fetc%2Fpasswd', { headers: auth })).status).toBe(404);
    expect((await world.app.request(`/media/${sha(png)}`, { headers: { ...auth, 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    expect((await world.app.request(`/media/${sha(png)}`, { headers: { ...auth, 'if-none-match': `"${sha(png)}"` } })).status).toBe(304);
  });

  it('text may be empty with attachments, not without', async () => {
    const ok = await world.post('/webchat/messages', { user: 'ann', text: '', attachments: [{ name: 'a.txt', mime: 'text/plain', dataBase64: b64(Buffer.from('hi')) }] });
    expect(ok.status).toBe(200);
    expect(world.received[0]!.text).toBe('');
    expect(world.received[0]!.attachments[0]!.type).toBe('file');
    const none = await world.post('/webchat/messages', { user: 'ann', text: ' ', attachments: [] });
    expect(none.status).toBe(400);
    expect((await errorOf(none)).code).toBe('invalid_text');
  });

  it('an attachment over media.maxBytes is a 413 that says so, and nothing is stored or submitted', async () => {
    const big = Buffer.alloc(64 * 1024 + 1, 1);
    const response = await world.post('/webchat/messages', {
      user: 'ann', text: 'two', attachments: [{ name: 'small.png', mime: 'image/png', dataBase64: b64(pngBytes()) }, { name: 'big.bin', mime: '', dataBase64: b64(big) }],
    });
    expect(response.status).toBe(413);
    const error = await errorOf(response);
    expect(error.code).toBe('attachment_too_large');
    expect(error.message).toContain('attachments[1] ("big.bin", 65537 bytes) is larger than media.maxBytes (65536 bytes)');
    expect(world.store.puts).toBe(0);
    expect(world.received).toHaveLength(0);
  });

  it('bad base64 is a 400 naming the attachment, and nothing of the message is stored', async () => {
    for (const bad of ['not base64 at all!', 'AAAA AAAA', 'AA==AAAA', 'A', `${b64(pngBytes(3000))}$`]) {
      const response = await world.post('/webchat/messages', {
        user: 'ann', text: 'x', attachments: [{ name: 'good.png', mime: 'image/png', dataBase64: b64(pngBytes()) }, { name: 'bad', dataBase64: bad }],
      });
      expect(response.status, bad).toBe(400);
      const error = await errorOf(response);
      expect(error.code).toBe('invalid_base64');
      expect(error.message).toContain('attachments[1].dataBase64 is not valid base64');
    }
    expect(world.store.puts).toBe(0);
    expect(world.received).toHaveLength(0);
  });

  it('malformed attachments, too many of them, or a bad mime are 400s', async () => {
    const one = { name: 'a', mime: 'text/plain', dataBase64: 'aGk=' };
    const cases: [unknown, string][] = [
      ['nope', 'invalid_attachments'], [[{ name: 'a' }], 'invalid_attachments'], [[{ dataBase64: 5 }], 'invalid_attachments'],
      [Array(11).fill(one), 'too_many_attachments'], [[{ ...one, mime: 'not a mime' }], 'invalid_mime'], [[{ ...one, dataBase64: '' }], 'empty_attachment'],
    ];
    for (const [attachments, code] of cases) {
      const response = await world.post('/webchat/messages', { user: 'ann', text: 'x', attachments });
      expect(response.status, code).toBe(400);
      expect((await errorOf(response)).code).toBe(code);
    }
    expect(world.store.puts).toBe(0);
  });

  it('the web chat route takes a body over gateway.maxBodyBytes up to its media limit; other routes keep theirs', async () => {
    const file = pngBytes(60 * 1024);
    const body = { user: 'ann', attachments: [{ name: 'a.png', mime: 'image/png', dataBase64: b64(file) }] };
    expect(JSON.stringify(body).length).toBeGreaterThan(32 * 1024);
    expect((await world.post('/webchat/messages', body)).status).toBe(200);
    const elsewhere = await world.post('/admin/anything', body);
    expect(elsewhere.status).toBe(413);
    // Ten attachments at the limit fit; more bytes than that are refused before they are read.
    const huge = await world.post('/webchat/messages', { user: 'ann', text: 'x'.repeat(1_000_000) });
    expect(huge.status).toBe(413);
    expect((await errorOf(huge)).code).toBe('body_too_large');
  });

  it('a streamed answer\'s done event carries the reply\'s files (stored from their path when needed) and the user\'s attachments', async () => {
    const tmp = temp.dir;
    const onDisk = path.join(tmp, 'notes.txt');
    writeFileSync(onDisk, 'the notes');
    const stored = await world.store.put(Buffer.from('chart'), { mime: 'image/png', maxBytes: 1000 });
    world.reply = () => [{ text: 'here', files: [{ path: '/nowhere', name: 'chart.png', mime: 'image/png', size: 5, sha256: stored.sha256 }, { path: onDisk, name: 'notes.txt', mime: 'text/plain', size: 9 }] }];
    const response = await world.post('/webchat/messages', { user: 'ann', text: 'files please', attachments: [{ name: 'a.png', mime: 'image/png', dataBase64: b64(pngBytes()) }] }, { accept: 'text/event-stream' });
    const events = await response.text();
    const done = JSON.parse(/event: done\ndata: (.*)\n/.exec(events)![1]!) as { reply: string; files: { name: string; url: string; sha256: string }[]; attachments: { url: string }[] };
    expect(done.reply).toBe('here');
    expect(done.files.map((f) => f.url)).toEqual([`/media/${stored.sha256}?name=chart.png`, `/media/${sha(Buffer.from('the notes'))}?name=notes.txt`]);
    expect(JSON.stringify(done)).not.toContain(tmp);
    expect(done.attachments[0]!.url).toBe(`/media/${sha(pngBytes())}?name=a.png`);
    const notes = await world.app.request(done.files[1]!.url, { headers: auth });
    expect(await notes.text()).toBe('the notes');
    expect(notes.headers.get('content-disposition')).toMatch(/^attachment; filename="notes.txt"/);
  });

  it('a later reply with a file reaches the user\'s open page with its link', async () => {
    const stored = await world.store.put(Buffer.from('report'), { mime: 'application/pdf', maxBytes: 1000 });
    const response = await world.app.request('/webchat/events?user=ann', { headers: auth });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const until = async (what: string) => {
      while (!text.includes(what)) text += decoder.decode((await reader.read()).value, { stream: true });
    };
    await until('event: ready');
    await world.webchat.send({ channel: 'webchat', accountId: 'default', chatId: 'ann' } as never, { text: 'your report', files: [{ path: '/x', name: 'report.pdf', mime: 'application/pdf', size: 6, sha256: stored.sha256 }] });
    await until('event: reply');
    await until('\n\n');
    const reply = JSON.parse(/event: reply\ndata: (.*)\n/.exec(text)![1]!) as { text: string; files: { url: string; path?: string }[] };
    expect(reply.text).toBe('your report');
    expect(reply.files).toEqual([{ name: 'report.pdf', mime: 'application/pdf', size: 6, sha256: stored.sha256, url: `/media/${stored.sha256}?name=report.pdf` }]);
    await reader.cancel();
  });
});

