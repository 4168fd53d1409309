import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebchatChannel } from '../../channels/webchat/index.ts';
import { systemClock } from '../../src/core/clock.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { TestChannel } from '../helpers/test-channel.ts';

/** Reproducible letters without a single space or punctuation mark: the worst case for a BPE tokenizer. */
function letters(length: number, seed: number): string {
  let x = seed;
  let out = '';
  while (out.length < length) {
    x = (Math.imul(x, 1_103_515_245) + 12_345) >>> 0;
    out += String.fromCharCode(97 + (x % 26));
  }
  return out;
}

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

describe('inbound text size and event-loop stalls', () => {
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway;
  const telegram = new TestChannel('telegram');

  beforeAll(async () => {
    tmp = tempDir('switchboard-inbound-');
    gw = await startTestGateway({
      dir: tmp.dir, adapters: [telegram, createWebchatChannel({ clock: systemClock })],
      config: { gateway: { maxInboundChars: 150_000 }, channels: { telegram: { maxInboundChars: 4096, dmPolicy: 'open' }, webchat: { maxInboundChars: 120_000 } } },
    });
  });
  afterAll(async () => {
    await gw?.stop();
    tmp?.remove();
  });

  /** Polls /healthz for a while with nothing else going on: the worst latency and delay the machine itself adds. */
  async function idleFloor(): Promise<{ latency: number; delay: number }> {
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    let latency = 0;
    const until = performance.now() + 300;
    while (performance.now() < until) {
      const started = performance.now();
      await (await fetch(`${gw.url}/healthz`)).arrayBuffer();
      latency = Math.max(latency, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    delay.disable();
    return { latency, delay: delay.max / 1e6 };
  }

  /** Sends one adversarial message and polls /healthz until it is answered: the worst latency and event-loop delay seen. */
  async function stallsWhileProcessing(seed: number, text = letters(100_000, seed)): Promise<{ latency: number; delay: number; polls: number }> {
    const body = JSON.stringify({ user: `adversary-${seed}`, text });
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    const latencies: number[] = [];
    let done = false;
    const turn = fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(async (r) => {
      done = true;
      return { status: r.status, body: (await r.json()) as { reply: string } };
    });
    while (!done) {
      const started = performance.now();
      const health = await fetch(`${gw.url}/healthz`);
      latencies.push(performance.now() - started);
      expect(health.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    delay.disable();
    const answer = await turn;
    expect(answer.status).toBe(200);
    expect(answer.body.reply).toContain('(offline) You said');
    return { latency: Math.max(...latencies), delay: delay.max / 1e6, polls: latencies.length };
  }

  /** Best of three attempts (seeds 2-4) of a message made by `text`: how far latency and delay went beyond an idle gateway's. */
  async function bestOfThree(text: (seed: number) => string, minPolls: number) {
    const attempts = [];
    const over = (a: { latency: number; delay: number; floor: { latency: number; delay: number } }) => Math.max(a.latency - a.floor.latency, a.delay - a.floor.delay);
    for (const seed of [2, 3, 4]) {
      const floor = await idleFloor();
      const result = { ...(await stallsWhileProcessing(seed, text(seed))), floor };
      attempts.push(result);
      expect(result.polls).toBeGreaterThanOrEqual(minPolls);
      if (over(result) < 100) break;
    }
    const best = attempts.reduce((a, b) => (over(a) <= over(b) ? a : b));
    expect(best.latency - best.floor.latency, JSON.stringify(attempts)).toBeLessThan(100);
    expect(best.delay - best.floor.delay, JSON.stringify(attempts)).toBeLessThan(100);
  }

  it('answers /healthz within 100 ms while a 100k-character run without spaces goes through a whole turn', async () => {
    // Everything loaded and compiled once, as in a gateway that has run for a while.
    await post(`${gw.url}/webchat/messages`, { user: 'warmup', text: letters(20_000, 1) });
    // Before the fix one such message stalled everything for 5-15 s. The machine running the suite is shared
    // (other processes on the same cores show up as delay too): the bound is 100 ms beyond what an idle
    // gateway shows at the same time, best of three attempts.
    await bestOfThree((seed) => letters(100_000, seed), 3);
  }, 60_000);

  it('answers /healthz within 100 ms while long whitespace runs (spaces, newlines, tabs, no-break spaces) go through a whole turn', async () => {
    // Each whitespace run was one pre-tokenizer piece: about 1 s of quadratic merging per 30k characters.
    const runs = (seed: number) => `a${' '.repeat(25_000 + seed)}b${'\n'.repeat(25_000)}c${'\t'.repeat(25_000)}d${'\u00a0'.repeat(25_000)}e`;
    await post(`${gw.url}/webchat/messages`, { user: 'warmup-ws', text: runs(1).slice(0, 3000) });
    // The turn may be over after a poll or two now; before, the first poll waited seconds.
    await bestOfThree(runs, 1);
  }, 60_000);

  it('refuses a web chat message over its limit with a 413 that says so, and answers the next one', async () => {
    const response = await post(`${gw.url}/webchat/messages`, { user: 'big', text: 'x'.repeat(120_001) });
    expect(response.status).toBe(413);
    const body = (await response.json()) as { error: { message: string; code: string } };
    expect(body.error.code).toBe('inbound_too_large');
    expect(body.error.message).toContain('120001 characters');
    expect(body.error.message).toContain('channels.webchat.maxInboundChars');
    const next = await post(`${gw.url}/webchat/messages`, { user: 'big', text: 'short now' });
    expect(next.status).toBe(200);
  });

  it('answers a streaming web chat request with the same JSON 413, before any stream', async () => {
    const response = await post(`${gw.url}/webchat/messages`, { user: 'big', text: 'y'.repeat(120_001) }, { accept: 'text/event-stream' });
    expect(response.status).toBe(413);
    expect(response.headers.get('content-type')).toContain('application/json');
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('inbound_too_large');
  });

  it('refuses an API message over gateway.maxInboundChars with a 413', async () => {
    const response = await post(`${gw.url}/v1/chat/completions`, { model: 'main', messages: [{ role: 'user', content: 'z'.repeat(150_001) }] });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain('gateway.maxInboundChars');
  });

  it('answers a platform message over the channel limit in its chat, and takes the next message', async () => {
    const before = telegram.sent.length;
    const submission = await telegram.inject('w'.repeat(5000), { peerId: '77' });
    expect(submission.status).toBe('blocked');
    await telegram.waitForSent(before + 1);
    expect(telegram.sent[before]!.message).toMatchObject({ kind: 'error' });
    expect(telegram.sent[before]!.message.text).toContain('5000 characters');
    expect(telegram.sent[before]!.message.text).toContain('channels.telegram.maxInboundChars');
    expect(telegram.sent[before]!.target.chatId).toBe('77');
    const ok = await telegram.inject('a normal message', { peerId: '77' });
    expect(ok.status).toBe('accepted');
    await ok.done;
    expect(telegram.texts().at(-1)).toContain('a normal message');
  });
});
