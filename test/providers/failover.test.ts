import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { ProviderError } from '../../src/core/errors.ts';
import { CooldownBook } from '../../src/providers/cooldowns.ts';
import { failedAttemptsOf, FailoverProvider, type FailoverEvent } from '../../src/providers/failover.ts';
import { OpenAIProvider } from '../../src/providers/openai.ts';
import type { CallOptions } from '../../src/providers/types.ts';
import { startFakeOpenAI, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';

// SPEC §18 through the real openai client: provider p (keys pk0, pk1, model p-large), then provider q (key qk0,
// model q-small), each its own fake server. Every credential has the client's default maxRetries (2), so a chain
// that asked for 0 shows it in the number of requests the fakes saw.

const keyOf = (r: RecordedRequest) => String(r.headers.authorization).replace(/^Bearer /, '');
const fast = { 'retry-after-ms': '1' };

describe('FailoverProvider over OpenAI providers', () => {
  let p: FakeOpenAI;
  let q: FakeOpenAI;
  let clock: ManualClock;
  let book: CooldownBook;
  let events: FailoverEvent[];
  /** Every request either fake saw, in order: `<key> <model>`. */
  let log: string[];
  /** Replies per key, used in order; then a success naming the key and model. */
  let replies: Map<string, FakeReply[]>;

  const answer = (r: RecordedRequest): FakeReply => {
    log.push(`${keyOf(r)} ${r.body.model}`);
    return replies.get(keyOf(r))?.shift() ?? { content: `answer of ${keyOf(r)} on ${r.body.model}` };
  };
  const credential = (fake: FakeOpenAI, id: string, apiKey: string, timeoutMs = 5000) => new OpenAIProvider({
    id, apiKey, baseUrl: fake.baseURL, model: `${id}-default`, contextWindow: 8000, maxTokens: 100,
    correlationHeader: 'x-correlation-id', maxRetries: 2, timeoutMs,
  });
  const chain = (timeouts: Record<string, number> = {}) => new FailoverProvider({
    targets: [
      { providerId: 'p', model: 'p-large', credentials: [credential(p, 'p', 'pk0', timeouts.pk0), credential(p, 'p', 'pk1', timeouts.pk1)] },
      { providerId: 'q', model: 'q-small', credentials: [credential(q, 'q', 'qk0', timeouts.qk0)] },
    ],
    cooldowns: book, clock, onFailover: (event) => events.push(event),
  });
  let n = 0;
  const call = (provider: FailoverProvider, options: CallOptions = {}) =>
    provider.complete({ model: 'ignored', messages: [{ role: 'user', content: 'hi' }], correlationId: `c${++n}` }, options);
  const fail = (key: string, ...reply: FakeReply[]) => replies.set(key, reply);

  beforeEach(async () => {
    p = await startFakeOpenAI(answer);
    q = await startFakeOpenAI(answer);
    clock = new ManualClock(Date.UTC(2026, 0, 1));
    book = new CooldownBook({ clock });
    events = [];
    log = [];
    replies = new Map();
  });
  afterEach(async () => {
    await p.close();
    await q.close();
  });

  const failovers: [string, FakeReply, string][] = [
    ['429', { status: 429, headers: fast }, 'PROVIDER_RATE_LIMITED'],
    ['529', { status: 529, headers: fast }, 'PROVIDER_OVERLOADED'],
    ['an overloaded_error body', { status: 503, error: { message: 'busy', type: 'overloaded_error' }, headers: fast }, 'PROVIDER_OVERLOADED'],
    ['500', { status: 500, headers: fast }, 'PROVIDER_FAILED'],
    ['502', { status: 502, headers: fast }, 'PROVIDER_FAILED'],
    ['401', { status: 401 }, 'PROVIDER_AUTH'],
    ['403', { status: 403 }, 'PROVIDER_AUTH'],
  ];
  for (const [name, reply, code] of failovers) {
    it(`fails over on ${name}: the next key, then the next model, each once with maxRetries 0 but the last`, async () => {
      fail('pk0', { ...reply });
      fail('pk1', { ...reply });
      const response = await call(chain());
      expect(log).toEqual(['pk0 p-large', 'pk1 p-large', 'qk0 q-small']);
      expect(response).toMatchObject({ content: 'answer of qk0 on q-small', providerId: 'q', model: 'q-small', retries: 0 });
      expect(response.failedAttempts).toMatchObject([
        { providerId: 'p', model: 'p-large', keyIndex: 0, code, retries: 0 },
        { providerId: 'p', model: 'p-large', keyIndex: 1, code, retries: 0 },
      ]);
      expect(book.snapshot().map((c) => [c.providerId, c.keyIndex, c.lastCode])).toEqual([['p', 0, code], ['p', 1, code]]);
    });
  }

  it('fails over on a timeout', async () => {
    fail('pk0', { delayMs: 5000, content: 'too late' });
    const response = await call(chain({ pk0: 150 }));
    expect(log).toEqual(['pk0 p-large', 'pk1 p-large']);
    expect(response).toMatchObject({ content: 'answer of pk1 on p-large', providerId: 'p', failedAttempts: [{ keyIndex: 0, code: 'PROVIDER_TIMEOUT' }] });
  });

  const kept: [string, FakeReply, string][] = [
    ['400', { status: 400, error: { message: 'bad tool schema' } }, 'PROVIDER_FAILED'],
    ['404', { status: 404, error: { message: 'no such model' } }, 'PROVIDER_FAILED'],
    ['a context overflow', { status: 400, error: { message: 'maximum context length is 8192 tokens', code: 'context_length_exceeded' } }, 'CONTEXT_OVERFLOW'],
  ];
  for (const [name, reply, code] of kept) {
    it(`does not fail over on ${name}: thrown at once with the attempt, no key cooled`, async () => {
      fail('pk0', reply);
      const error = await call(chain()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderError);
      expect(error).toMatchObject({ code });
      expect(log).toEqual(['pk0 p-large']);
      expect(failedAttemptsOf(error)).toMatchObject([{ providerId: 'p', keyIndex: 0, code }]);
      expect(book.snapshot()).toEqual([]);
      expect(events).toEqual([]);
    });
  }

  it('does not fail over when the caller aborts', async () => {
    fail('pk0', { delayMs: 5000, content: 'late' });
    const controller = new AbortController();
    const pending = call(chain(), { signal: controller.signal });
    while (log.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    controller.abort();
    await expect(pending).rejects.toMatchObject({ code: 'PROVIDER_ABORTED' });
    expect(log).toEqual(['pk0 p-large']);
    expect(book.snapshot()).toEqual([]);
  });

  it("gives the last candidate the caller's maxRetries, or the provider's own when the caller gives none", async () => {
    const down = (): FakeReply[] => Array.from({ length: 5 }, () => ({ status: 500, headers: fast }));
    for (const [maxRetries, lastRequests] of [[1, 2], [undefined, 3]] as const) {
      log = [];
      book = new CooldownBook({ clock });
      for (const key of ['pk0', 'pk1', 'qk0']) fail(key, ...down());
      const error = await call(chain(), maxRetries === undefined ? {} : { maxRetries }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'PROVIDER_FAILED', providerStatus: 500 });
      expect(log).toEqual(['pk0 p-large', 'pk1 p-large', ...Array.from({ length: lastRequests }, () => 'qk0 q-small')]);
      expect(failedAttemptsOf(error)?.map((a) => [a.keyIndex, a.providerId, a.retries])).toEqual([[0, 'p', 0], [1, 'p', 0], [0, 'q', lastRequests - 1]]);
    }
  });

  it('sums the retries of the chain into the answer', async () => {
    fail('pk0', { status: 429, headers: fast });
    fail('pk1', { status: 429, headers: fast });
    fail('qk0', { status: 500, headers: fast });
    const response = await call(chain(), { maxRetries: 1 });
    expect(log).toEqual(['pk0 p-large', 'pk1 p-large', 'qk0 q-small', 'qk0 q-small']);
    expect(response).toMatchObject({ providerId: 'q', retries: 1 });
  });

  it('skips a cooling key until its cooldown ends; its backoff doubles; a success clears it', async () => {
    const provider = chain();
    fail('pk0', { status: 429, headers: fast });
    expect((await call(provider)).content).toBe('answer of pk1 on p-large');
    expect((await call(provider)).content).toBe('answer of pk1 on p-large');
    expect(log).toEqual(['pk0 p-large', 'pk1 p-large', 'pk1 p-large']);

    clock.advance(10_000);
    fail('pk0', { status: 429, headers: fast });
    log = [];
    await call(provider);
    expect(log).toEqual(['pk0 p-large', 'pk1 p-large']);
    expect(book.coolingUntil('p', 0)).toBe(clock.now() + 20_000);

    clock.advance(19_999);
    log = [];
    await call(provider);
    expect(log).toEqual(['pk1 p-large']);

    clock.advance(1);
    log = [];
    expect(await call(provider)).toMatchObject({ content: 'answer of pk0 on p-large', failedAttempts: [] });
    expect(book.snapshot()).toEqual([]);
    fail('pk0', { status: 429, headers: fast });
    await call(provider);
    expect(book.coolingUntil('p', 0)).toBe(clock.now() + 10_000);
  });

  it('tries the key whose cooldown ends first when every key is cooling, with the caller\'s maxRetries', async () => {
    book.fail('p', 0, 'PROVIDER_AUTH');
    book.fail('p', 1, 'PROVIDER_RATE_LIMITED');
    book.fail('q', 0, 'PROVIDER_RATE_LIMITED');
    book.fail('q', 0, 'PROVIDER_RATE_LIMITED');
    fail('pk1', { status: 429, headers: fast }, { status: 429, headers: fast });
    const response = await call(chain(), { maxRetries: 2 });
    expect(log).toEqual(['pk1 p-large', 'pk1 p-large', 'pk1 p-large']);
    expect(response).toMatchObject({ providerId: 'p', model: 'p-large', content: 'answer of pk1 on p-large', retries: 2 });
    expect(book.coolingUntil('p', 1)).toBeUndefined();

    fail('pk1', { status: 429, headers: fast });
    book.fail('p', 1, 'PROVIDER_RATE_LIMITED');
    log = [];
    const error = await call(chain(), { maxRetries: 0 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'PROVIDER_RATE_LIMITED' });
    expect(log).toEqual(['pk1 p-large']);
  });

  it('tells the observer of every failover, and when nothing was left', async () => {
    fail('pk0', { status: 401 });
    fail('pk1', { status: 429, headers: fast });
    fail('qk0', { status: 529, headers: fast });
    const error = await call(chain(), { maxRetries: 0 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'PROVIDER_OVERLOADED' });
    const at = clock.now();
    expect(events).toEqual([
      { from: { providerId: 'p', model: 'p-large', keyIndex: 0 }, to: { providerId: 'p', model: 'p-large', keyIndex: 1 }, code: 'PROVIDER_AUTH', message: expect.stringContaining('providers.p.apiKey'), at },
      { from: { providerId: 'p', model: 'p-large', keyIndex: 1 }, to: { providerId: 'q', model: 'q-small', keyIndex: 0 }, code: 'PROVIDER_RATE_LIMITED', message: expect.any(String), at },
      { from: { providerId: 'q', model: 'q-small', keyIndex: 0 }, code: 'PROVIDER_OVERLOADED', message: expect.any(String), at },
    ]);
    expect(JSON.stringify(events)).not.toMatch(/pk0|pk1|qk0/);
    expect(failedAttemptsOf(error)?.map((a) => a.code)).toEqual(['PROVIDER_AUTH', 'PROVIDER_RATE_LIMITED', 'PROVIDER_OVERLOADED']);
    expect(book.coolingUntil('p', 0)).toBe(at + 30 * 60_000);
  });

  it('fails a stream over when nothing was passed on yet: the caller sees only the answer', async () => {
    fail('pk0', { status: 429, headers: fast });
    const deltas: string[] = [];
    const response = await call(chain(), { onDelta: (text) => deltas.push(text) });
    expect(deltas.join('')).toBe('answer of pk1 on p-large');
    expect(response).toMatchObject({ content: 'answer of pk1 on p-large', failedAttempts: [{ keyIndex: 0 }] });
    expect(p.requests.every((r) => r.body.stream === true)).toBe(true);
  });
});
