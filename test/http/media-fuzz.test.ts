import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMediaWorld, type MediaWorld } from './media-harness.ts';

const base64 = fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString('base64'));
/** Base64 with damage: a character replaced, cut, padded wrongly, spaced. */
const damaged = fc.tuple(base64, fc.nat(), fc.constantFrom('!', ' ', '=', '-', '\n', 'é', '==', '\u0000', '')).map(([s, at, ch]) => s.slice(0, at % (s.length + 1)) + ch + s.slice(at % (s.length + 1) + 1));
const text = fc.oneof(fc.string({ maxLength: 40 }), fc.constant(''), fc.string({ unit: 'grapheme', maxLength: 20 }));
const anything = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined));
const mime = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('image/png', 'application/pdf', '', 'text/plain; charset=utf-8', 'IMAGE/JPEG', 'image/svg+xml', 'text/html', ' ') },
  { weight: 1, arbitrary: fc.oneof(fc.constantFrom('a/b/c', 'image/', '/png'), fc.string({ maxLength: 30 }), fc.tuple(fc.stringMatching(/^[a-z]{1,8}$/), fc.string({ maxLength: 24 })).map(([type, sub]) => `${type}/${sub}`)) },
);

/** Mostly well-formed, so that most bodies get past the first check to the later ones. */
const mostly = <T, U>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<U>, weight = 5) => fc.oneof({ weight, arbitrary: good }, { weight: 1, arbitrary: bad });
/** For the fields of each item of a list, where any bad one refuses the whole body. */
const rarelyBad = <T, U>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<U>) => mostly(good, bad, 25);
const name = fc.oneof(fc.string({ maxLength: 50 }), fc.string({ unit: 'binary', maxLength: 30 }), fc.constantFrom('../../x', 'a\u202eb.exe', '', '.htaccess', '  . ', 'a/b\\c', '"quoted"'));
const webchatAttachment = mostly(
  fc.record({ name: rarelyBad(name, anything), mime: rarelyBad(mime, anything), dataBase64: fc.oneof({ weight: 25, arbitrary: base64 }, { weight: 1, arbitrary: damaged }, { weight: 1, arbitrary: anything }) }, { requiredKeys: ['dataBase64'] }),
  anything,
  25,
);
const webchatBody = fc.record({
  user: mostly(fc.constantFrom('ann', 'bo', undefined), fc.oneof(fc.constantFrom('bo b', ''), anything)),
  text: mostly(text, anything),
  attachments: mostly(fc.array(webchatAttachment, { maxLength: 12 }), anything),
}, { requiredKeys: [] });

const url = fc.oneof(
  { weight: 3, arbitrary: fc.tuple(fc.constantFrom('image/png', 'image/jpeg'), base64).map(([m, d]) => `data:${m};base64,${d}`) },
  fc.tuple(fc.constantFrom('image/png', 'image/', 'text/html', 'image/png;charset=x', ''), fc.oneof(base64, damaged), fc.constantFrom(';base64,', ',', ';base64', ';BASE64,')).map(([m, d, sep]) => `data:${m}${sep}${d}`),
  fc.webUrl({ validSchemes: ['https', 'http', 'ftp', 'file'], withQueryParameters: true, withFragments: true }),
  fc.constantFrom('javascript:alert(1)', 'data:', 'https://', '//host/x.png', 'HTTPS://EXAMPLE.COM/A.PNG', 'data:image/png;base64,'),
  fc.string({ maxLength: 40 }),
);
const goodUrl = fc.oneof(
  { weight: 3, arbitrary: fc.tuple(fc.constantFrom('image/png', 'image/jpeg', 'image/svg+xml'), base64).map(([m, d]) => `data:${m};base64,${d}`) },
  { weight: 1, arbitrary: fc.webUrl({ validSchemes: ['https'], withQueryParameters: true }) },
);
const part = fc.oneof(
  { weight: 20, arbitrary: fc.record({ type: fc.constant('image_url'), image_url: fc.oneof(fc.record({ url: goodUrl }), goodUrl) }) },
  { weight: 12, arbitrary: fc.record({ type: fc.constant('text'), text: rarelyBad(text, anything) }, { requiredKeys: ['type'] }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('image_url'), image_url: fc.record({ url }) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constantFrom('image_url', 'input_image'), image_url: fc.oneof(url, fc.record({ url: fc.oneof(url, anything), detail: fc.oneof(fc.constantFrom('low', 'high'), anything) }, { requiredKeys: [] }), anything) }, { requiredKeys: ['type'] }) },
  { weight: 1, arbitrary: anything },
);
const earlier = fc.record({ role: rarelyBad(fc.constantFrom('user', 'assistant', 'system'), anything), content: mostly(text, fc.oneof(fc.array(part, { maxLength: 4 }), anything)) }, { requiredKeys: ['role'] });
const last = fc.record({ role: fc.constant('user'), content: mostly(fc.array(part, { minLength: 1, maxLength: 6 }), fc.oneof(text, anything)) });
const openaiBody = fc.record({
  model: rarelyBad(fc.constantFrom('main', undefined), anything),
  messages: mostly(fc.tuple(fc.array(earlier, { maxLength: 3 }), last).map(([before, final]) => [...before, final]), anything),
  stream: rarelyBad(fc.constantFrom(false, true, undefined), anything),
}, { requiredKeys: [] });

/** Generated bodies of the routes that take media: every answer is a 2xx or a 4xx JSON error, never a 500. */
describe('media bodies, fuzzed', { timeout: 120_000 }, () => {
  let world: MediaWorld;
  beforeAll(async () => { world = await startMediaWorld({ maxBytes: 2048 }); });
  afterAll(async () => { await world.close(); });

  const outcomes = new Map<string, number>();
  afterAll(() => {
    // The generators reach past the first checks: some bodies are answered, some refused for their attachments.
    expect(outcomes.get('/webchat/messages 200') ?? 0).toBeGreaterThan(20);
    expect(outcomes.get('/v1/chat/completions 200') ?? 0).toBeGreaterThan(20);
  });
  const check = async (path: string, body: unknown) => {
    const response = await world.post(path, body);
    outcomes.set(`${path} ${response.status}`, (outcomes.get(`${path} ${response.status}`) ?? 0) + 1);
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
