import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { CooldownBook } from '../../src/providers/cooldowns.ts';
import { failedAttemptsOf, FailoverProvider, type FailoverEvent } from '../../src/providers/failover.ts';
import { OpenAIProvider } from '../../src/providers/openai.ts';

// A streamed answer whose connection breaks off: after text reached the caller it is not failed over (the user saw
// it); when only a <think> block came (nothing passed on) it is. A raw SSE server, as the fake cannot break off.

describe('FailoverProvider: a stream that breaks off', () => {
  let server: Server;
  let baseURL: string;
  /** What each key's stream sends before the connection is cut; absent = a whole answer. */
  let broken: Record<string, string>;
  let seen: string[];

  beforeEach(async () => {
    broken = {};
    seen = [];
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const key = String(req.headers.authorization).replace(/^Bearer /, '');
        seen.push(key);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = (delta: object, finish: string | null = null) =>
          res.write(`data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
        const sent = broken[key];
        if (sent !== undefined) {
          chunk({ content: sent });
          setTimeout(() => res.socket?.destroy(), 10);
          return;
        }
        chunk({ content: `whole answer of ${key}` });
        chunk({}, 'stop');
        res.end('data: [DONE]\n\n');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  afterEach(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));

  const chain = (clock: ManualClock, book: CooldownBook, events: FailoverEvent[]) => new FailoverProvider({
    targets: [{
      providerId: 'p', model: 'm',
      credentials: ['k0', 'k1'].map((apiKey) => new OpenAIProvider({
        id: 'p', apiKey, baseUrl: baseURL, model: 'm', contextWindow: 8000, maxTokens: 100, correlationHeader: 'x-correlation-id', maxRetries: 0, timeoutMs: 5000,
      })),
    }],
    cooldowns: book, clock, onFailover: (event) => events.push(event),
  });

  it('is not failed over once text was passed on', async () => {
    broken.k0 = 'Hel';
    const clock = new ManualClock();
    const book = new CooldownBook({ clock });
    const events: FailoverEvent[] = [];
    const deltas: string[] = [];
    const error = await chain(clock, book, events).complete({ model: 'm', messages: [{ role: 'user', content: 'hi' }], correlationId: 'c1' }, { onDelta: (t) => deltas.push(t) })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'PROVIDER_UNAVAILABLE' });
    expect(deltas).toEqual(['Hel']);
    expect(seen).toEqual(['k0']);
    expect(events).toEqual([]);
    expect(failedAttemptsOf(error)).toMatchObject([{ keyIndex: 0, code: 'PROVIDER_UNAVAILABLE' }]);
    // The key did fail: the next call starts with the other one.
    expect(book.coolingUntil('p', 0)).toBeGreaterThan(clock.now());
  });

  it('is failed over when only a <think> block came before the break', async () => {
    broken.k0 = '<think>let me see';
    const clock = new ManualClock();
    const events: FailoverEvent[] = [];
    const deltas: string[] = [];
    const response = await chain(clock, new CooldownBook({ clock }), events)
      .complete({ model: 'm', messages: [{ role: 'user', content: 'hi' }], correlationId: 'c2' }, { onDelta: (t) => deltas.push(t) });
    expect(deltas.join('')).toBe('whole answer of k1');
    expect(response).toMatchObject({ content: 'whole answer of k1', failedAttempts: [{ keyIndex: 0, code: 'PROVIDER_UNAVAILABLE' }] });
    expect(seen).toEqual(['k0', 'k1']);
    expect(events).toMatchObject([{ from: { keyIndex: 0 }, to: { keyIndex: 1 }, code: 'PROVIDER_UNAVAILABLE' }]);
  });
});
