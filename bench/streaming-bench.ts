// Streaming edits (issue 32): a long Markdown answer streamed into a live reply at a model's pace, on simulated
// time (nothing sleeps): edits per answer at the default cadence, and the CPU each post or edit costs (the whole
// text rendered again for the platform, and the call; the CPU inside the channel's calls, renders included). Telegram through its live calls (an API that answers at once),
// Discord and Slack through their renderers.
import type { Api } from 'grammy';
import { renderDiscord } from '../channels/discord/render.ts';
import { renderSlackChunks } from '../channels/slack/render.ts';
import { telegramLiveCalls } from '../channels/telegram/live.ts';
import { DEFAULT_STREAMING } from '../src/config/streaming.ts';
import type { LiveReplyCalls } from '../src/core/channel-adapter.ts';
import { silentLogger } from '../src/core/logger.ts';
import type { DeliveryTarget } from '../src/core/message.ts';
import { LiveReply, type LiveTimers } from '../src/gateway/live-reply.ts';
import { performance } from 'node:perf_hooks';
import { round } from './stats.ts';

/** A Markdown answer of about `chars` characters: headings, lists, code, links, emphasis. */
function answerOf(chars: number): string {
  const block = [
    '## Plan\n\nHere is **what I would do**, step by step, with a few `inline` details:\n\n',
    '1. Read the [configuration](https://example.com/docs/config) and check the *defaults*.\n2. Run the tests.\n3. Ship it.\n\n',
    '```ts\nexport function add(a: number, b: number): number {\n  return a + b;\n}\n```\n\n',
    '> A quoted note, with a _subtle_ point & an <angle> bracket.\n\n- one\n- two\n  - nested\n\n',
  ].join('');
  let text = '';
  while (text.length < chars) text += block;
  return text.slice(0, chars);
}

/** Virtual time: timers fire in order as the bench moves the clock. */
class VirtualTime implements LiveTimers {
  now = 0;
  private seq = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.pending.set(id, { at: this.now + Math.max(0, ms), fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  /** Runs the timers due by `to`, in order, letting each one's promises settle. */
  async advanceTo(to: number): Promise<void> {
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.pending) if (entry[1].at <= to && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      this.pending.delete(next[0]);
      this.now = next[1].at;
      next[1].fn();
      await new Promise((r) => setImmediate(r));
    }
    this.now = to;
  }
}

/** `calls`, with the time spent inside them (render, post, edit: synchronous work) added to `spent.us`. */
function metered(calls: LiveReplyCalls, spent: { us: number }): LiveReplyCalls {
  const timed = <A extends unknown[], R>(fn: (...args: A) => R) => (...args: A): R => {
    // Wall time of the synchronous part (getrusage's CPU time is too coarse for calls this short).
    const t0 = performance.now();
    try {
      return fn(...args);
    } finally {
      spent.us += (performance.now() - t0) * 1000;
    }
  };
  return { ...calls, render: timed(calls.render), post: timed(calls.post), edit: timed(calls.edit) };
}

async function streamOnce(calls: LiveReplyCalls, answer: string, deltaChars: number, deltaMs: number): Promise<{ posts: number; edits: number; callsUs: number }> {
  const spent = { us: 0 };
  calls = metered(calls, spent);
  const time = new VirtualTime();
  const target: DeliveryTarget = { channel: 'telegram', accountId: 'default', chatId: '42', chatType: 'direct' };
  const live = new LiveReply({
    calls, target, mode: 'partial', minChars: DEFAULT_STREAMING.minChars, firstAfterMs: DEFAULT_STREAMING.firstAfterMs, intervalMs: DEFAULT_STREAMING.intervalMs,
    clock: { now: () => time.now }, timers: time, pace: new Map(), logger: silentLogger(),
  });
  for (let at = 0, i = 0; i < answer.length; i += deltaChars, at += deltaMs) {
    await time.advanceTo(at);
    live.append(answer.slice(i, i + deltaChars));
  }
  await live.finish({ text: answer });
  return { posts: live.stats.posts, edits: live.stats.edits, callsUs: spent.us };
}

/**
 * Each channel: `answers` answers of `chars` characters in `deltaChars`-character deltas every `deltaMs` (a model
 * writing ~400 characters a second), at the default cadence (one edit a second per chat).
 */
export async function runStreamingBench(options: { answers: number; chars: number; deltaChars: number; deltaMs: number }) {
  const api = { sendMessage: async () => ({ message_id: 1 }), editMessageText: async () => true } as unknown as Api;
  const plain = (render: (text: string) => string[]): LiveReplyCalls => ({ render: (m) => render(m.text), post: async () => '1', edit: async () => undefined });
  const channels: [string, LiveReplyCalls][] = [
    ['telegram', telegramLiveCalls(() => api)],
    ['discord', plain((text) => renderDiscord({ text }))],
    ['slack', plain((text) => renderSlackChunks(text))],
  ];
  const answer = answerOf(options.chars);
  const rows = [];
  for (const [channel, calls] of channels) {
    await streamOnce(calls, answer, options.deltaChars, options.deltaMs); // warm-up
    let posts = 0;
    let edits = 0;
    let cpuUs = 0;
    for (let n = 0; n < options.answers; n++) {
      const run = await streamOnce(calls, answer, options.deltaChars, options.deltaMs);
      posts += run.posts;
      edits += run.edits;
      cpuUs += run.callsUs;
    }
    const calls_ = posts + edits;
    rows.push({
      channel, answerChars: options.chars, streamSeconds: round((options.chars / options.deltaChars) * options.deltaMs / 1000, 1),
      postsPerAnswer: round(posts / options.answers, 1), editsPerAnswer: round(edits / options.answers, 1),
      cpuUsPerCall: round(cpuUs / Math.max(1, calls_), 0), cpuMsPerAnswer: round(cpuUs / options.answers / 1000, 2),
    });
  }
  return rows;
}
