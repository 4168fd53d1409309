import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMediaWorld, type MediaWorld } from './media-harness.ts';

const base64 = fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString('base64'));
/** Base64 with damage: a character replaced, cut, padded wrongly, spaced. */
const damaged = fc.tuple(base64, fc.nat(), fc.constantFrom('!', ' ', '=', '-', '\n', 'é', '==', '\u0000', '')).map(([s, at, ch]) => s.slice(0, at % (s.length + 1)) + ch + s.slice(at % (s.length + 1) + 1));
const text = fc.oneof(fc.string({ maxLength: 40 }), fc.constant(''), fc.string({ unit: 'grapheme', maxLength: 20 }));
const anything = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined));
const mime = fc.oneof(fc.constantFrom('image/png', 'application/pdf', '', 'text/plain; charset=utf-8', 'IMAGE/JPEG', 'a/b/c', 'image/svg+xml', ' '), fc.string({ maxLength: 30 }), anything);

const webchatAttachment = fc.oneof(
  fc.record({ name: fc.oneof(fc.string({ maxLength: 50 }), fc.constantFrom('../../x', 'a\u202eb.exe', '', '.htaccess'), anything), mime, dataBase64: fc.oneof(base64, damaged, anything) }, { requiredKeys: [] }),
  anything,
);
const webchatBody = fc.record({
  user: fc.oneof(fc.constantFrom('ann', 'bo b', ''), anything),
  text: fc.oneof(text, anything),
  attachments: fc.oneof(fc.array(webchatAttachment, { maxLength: 12 }), anything),
}, { requiredKeys: [] });

const url = fc.oneof(
  fc.tuple(fc.constantFrom('image/png', 'image/', 'text/html', 'image/png;charset=x', ''), fc.oneof(base64, damaged), fc.constantFrom(';base64,', ',', ';base64', ';BASE64,')).map(([m, d, sep]) => `data:${m}${sep}${d}`),
  fc.webUrl({ validSchemes: ['https', 'http', 'ftp', 'file'], withQueryParameters: true, withFragments: true }),
  fc.constantFrom('javascript:alert(1)', 'data:', 'https://', '//host/x.png', 'HTTPS://EXAMPLE.COM/A.PNG', 'data:image/png;base64,'),
  fc.string({ maxLength: 40 }),
);
const part = fc.oneof(
  fc.record({ type: fc.constant('text'), text: fc.oneof(text, anything) }, { requiredKeys: ['type'] }),
  fc.record({ type: fc.constantFrom('image_url', 'input_image'), image_url: fc.oneof(url, fc.record({ url: fc.oneof(url, anything), detail: fc.oneof(fc.constantFrom('low', 'high'), anything) }, { requiredKeys: [] }), anything) }, { requiredKeys: ['type'] }),
  anything,
);
const openaiBody = fc.record({
  model: fc.oneof(fc.constant('main'), anything),
  messages: fc.oneof(fc.array(fc.record({ role: fc.oneof(fc.constantFrom('user', 'assistant', 'system'), anything), content: fc.oneof(text, fc.array(part, { maxLength: 12 }), anything) }, { requiredKeys: [] }), { maxLength: 4 }), anything),
  stream: fc.oneof(fc.boolean(), anything),
}, { requiredKeys: [] });

/** Generated bodies of the routes that take media: every answer is a 2xx or a 4xx JSON error, never a 500. */
describe('media bodies, fuzzed', { timeout: 120_000 }, () => {
  let world: MediaWorld;
  beforeAll(async () => { world = await startMediaWorld({ maxBytes: 2048 }); });
  afterAll(async () => { await world.close(); });

  const check = async (path: string, body: unknown) => {
    const response = await world.post(path, body);
    const answer = await response.text();
    if (response.status >= 500 || response.status < 200) throw new Error(`${response.status} for ${JSON.stringify(body)?.slice(0, 500)}: ${answer}`);
    if (response.status >= 400) expect(JSON.parse(answer)).toHaveProperty('error.code');
  };

  it('POST /webchat/messages', async () => {
    await fc.assert(fc.asyncProperty(webchatBody, (body) => check('/webchat/messages', body)), { numRuns: 300 });
  });

  it('POST /v1/chat/completions', async () => {
    await fc.assert(fc.asyncProperty(openaiBody, (body) => check('/v1/chat/completions', body)), { numRuns: 300 });
  });

  it('whatever was stored is exactly what a 200 handed on', async () => {
    world.received.length = 0;
    await fc.assert(fc.asyncProperty(fc.array(fc.uint8Array({ minLength: 1, maxLength: 2048 }), { minLength: 1, maxLength: 3 }), async (files) => {
      const response = await world.post('/webchat/messages', { user: 'ann', attachments: files.map((f, i) => ({ name: `f${i}`, dataBase64: Buffer.from(f).toString('base64') })) });
      expect(response.status).toBe(200);
      const handed = world.received.at(-1)!.attachments;
      for (const [i, f] of files.entries()) expect((await world.store.get(handed[i]!.sha256!))?.equals(Buffer.from(f))).toBe(true);
    }), { numRuns: 100 });
  });
});
