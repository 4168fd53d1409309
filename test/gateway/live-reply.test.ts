import { describe, expect, it } from 'vitest';
import type { LiveReplyCalls } from '../../src/core/channel-adapter.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { DeliveryTarget } from '../../src/core/message.ts';
import { LiveReply, type ChatPace } from '../../src/gateway/live-reply.ts';
import { ClockedTimers } from '../helpers/clocked-timers.ts';

const target: DeliveryTarget = { channel: 'telegram', accountId: 'default', chatId: '42', chatType: 'direct' };

/** A platform whose messages hold `limit` characters; `editDelayMs` holds each edit that long (a 429 waited out). */
function fakePlatform(clock: ManualClock, timers: ClockedTimers, options: { limit?: number; editDelayMs?: number } = {}) {
  const limit = options.limit ?? 100;
  const messages = new Map<string, string>();
  const log: { call: 'post' | 'edit'; id: string; text: string; at: number }[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let next = 1;
  const calls: LiveReplyCalls = {
    render: (message) => {
      const text = `${message.notice ? `${message.notice}\n` : ''}${message.text}`;
      const parts: string[] = [];
      for (let at = 0; at < text.length; at += limit) parts.push(`<${text.slice(at, at + limit)}>`);
      return parts;
    },
    post: async (_t, part) => {
      const id = `m${next++}`;
      messages.set(id, part);
      log.push({ call: 'post', id, text: part, at: clock.now() });
      return id;
    },
    edit: async (_t, id, part) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      if (options.editDelayMs) await new Promise<void>((resolve) => timers.setTimeout(resolve, options.editDelayMs!));
      inFlight--;
      messages.set(id, part);
      log.push({ call: 'edit', id, text: part, at: clock.now() });
    },
  };
  return { calls, messages, log, get maxInFlight() { return maxInFlight; } };
}

function setup(options: { mode?: 'partial' | 'progress'; limit?: number; editDelayMs?: number; posted?: string[]; pace?: ChatPace; clock?: ManualClock; timers?: ClockedTimers } = {}) {
  const clock = options.clock ?? new ManualClock(1_000_000);
  const timers = options.timers ?? new ClockedTimers(clock);
  const platform = fakePlatform(clock, timers, options);
  const journaled: string[][] = [];
  const reply = new LiveReply({
    calls: platform.calls, target, mode: options.mode ?? 'partial', minChars: 40, firstAfterMs: 1000, intervalMs: 1000,
    clock, timers, pace: options.pace ?? new Map(), logger: silentLogger(), ...(options.posted ? { posted: options.posted } : {}),
    onPosted: async (ids) => { journaled.push([...ids]); },
  });
  return { clock, timers, platform, reply, journaled };
}

/** Streams `words` at `perSecond` tokens a second through the manual clock. */
async function stream(reply: LiveReply, timers: ClockedTimers, words: string[], perSecond = 30): Promise<void> {
  for (const word of words) {
    reply.append(word);
    await timers.advance(Math.round(1000 / perSecond));
  }
}

const words = (n: number, prefix = 'w') => Array.from({ length: n }, (_, i) => `${prefix}${i} `);

describe('LiveReply (SPEC §16 partial and progress, cadence on an injected clock)', () => {
  it('partial: posts once when the answer reaches minChars, then edits at most once per interval; the final edit is the whole answer', async () => {
    const { reply, timers, platform, clock, journaled } = setup({ limit: 10_000 });
    const started = clock.now();
    const text = words(300);
    await stream(reply, timers, text); // 300 tokens at 30/s: 10 s
    const final = text.join('') + 'end.';
    expect(await reply.finish({ text: final })).toBe(true);
    const posts = platform.log.filter((c) => c.call === 'post');
    const edits = platform.log.filter((c) => c.call === 'edit');
    expect(posts).toHaveLength(1);
    // 10 s of streaming at one edit a second, plus the final edit.
    expect(edits.length).toBeGreaterThanOrEqual(9);
    expect(edits.length).toBeLessThanOrEqual(11);
    for (let i = 1; i < platform.log.length - 1; i++) expect(platform.log[i]!.at - platform.log[i - 1]!.at).toBeGreaterThanOrEqual(1000);
    // The first text is visible as soon as 40 characters are there ("w0 " … : 11 words, at 33 ms each).
    expect(reply.stats.firstVisibleAt! - started).toBeLessThanOrEqual(400);
    expect(platform.messages.get(posts[0]!.id)).toBe(`<${final}>`);
    expect(journaled).toEqual([[posts[0]!.id]]);
  });

  it('partial: a short answer that is over before minChars and the first second posts nothing (sent the ordinary way)', async () => {
    const { reply, timers, platform } = setup();
    await stream(reply, timers, ['Hi ', 'there.'], 30);
    expect(await reply.finish({ text: 'Hi there.' })).toBe(false);
    expect(platform.log).toEqual([]);
  });

  it('partial: a slow answer shorter than minChars is posted after the first second', async () => {
    const { reply, timers, platform } = setup();
    reply.append('Let me see');
    await timers.advance(999);
    expect(platform.log).toEqual([]);
    await timers.advance(1);
    expect(platform.log.map((c) => c.call)).toEqual(['post']);
  });

  it('partial: an answer longer than one message fills it and continues in a new one', async () => {
    const { reply, timers, platform } = setup({ limit: 100 });
    const text = words(120);
    await stream(reply, timers, text);
    const final = text.join('');
    expect(await reply.finish({ text: final })).toBe(true);
    const posted = platform.log.filter((c) => c.call === 'post').map((c) => c.id);
    expect(posted.length).toBe(Math.ceil(final.length / 100));
    expect(posted.map((id) => platform.messages.get(id)).join('')).toBe(platform.calls.render({ text: final }).join(''));
  });

  it('progress: one status line, edited as tools run, replaced by the answer', async () => {
    const { reply, timers, platform } = setup({ mode: 'progress' });
    reply.setStatus('thinking…');
    await timers.advance(10);
    reply.setStatus('running memory_search…');
    await timers.advance(1500);
    reply.setStatus('thinking…');
    await timers.advance(1500);
    expect(await reply.finish({ text: 'The answer.' })).toBe(true);
    expect(platform.log.map((c) => `${c.call} ${c.id} ${c.text}`)).toEqual([
      'post m1 <thinking…>', 'edit m1 <running memory_search…>', 'edit m1 <thinking…>', 'edit m1 <The answer.>',
    ]);
  });

  it('a slow edit (a 429 waited out) is never overlapped, and the next one waits a whole interval after it', async () => {
    const { reply, timers, platform } = setup({ limit: 10_000, editDelayMs: 5000 });
    await stream(reply, timers, words(300));
    const finished = reply.finish({ text: words(300).join('') });
    await timers.advance(20_000);
    await finished;
    expect(platform.maxInFlight).toBe(1);
    const edits = platform.log.filter((c) => c.call === 'edit');
    // 10 s of streaming with each edit held 5 s: about two edits, then the final one.
    expect(edits.length).toBeLessThanOrEqual(4);
    for (let i = 1; i < edits.length - 1; i++) expect(edits[i]!.at - edits[i - 1]!.at).toBeGreaterThanOrEqual(6000);
  });

  it('two live replies in one chat share its edit cadence', async () => {
    const pace: ChatPace = new Map();
    const clock = new ManualClock(1_000_000);
    const timers = new ClockedTimers(clock);
    const a = setup({ limit: 10_000, pace, clock, timers });
    const b = setup({ limit: 10_000, pace, clock, timers });
    for (const word of words(90)) {
      a.reply.append(word);
      b.reply.append(word);
      await timers.advance(33);
    }
    expect(a.platform.log.length + b.platform.log.length).toBeGreaterThanOrEqual(2);
    const all = [...a.platform.log, ...b.platform.log].map((c) => c.at).sort((x, y) => x - y);
    for (let i = 1; i < all.length; i++) expect(all[i]! - all[i - 1]!).toBeGreaterThanOrEqual(1000);
  });

  it('a replay edits the messages posted before the crash instead of posting a copy', async () => {
    const { reply, timers, platform } = setup({ posted: ['m-old'] });
    platform.messages.set('m-old', '<half an ans>');
    await stream(reply, timers, words(20));
    expect(await reply.finish({ text: 'The whole answer.' })).toBe(true);
    expect(platform.log.filter((c) => c.call === 'post')).toEqual([]);
    expect(platform.messages.get('m-old')).toBe('<The whole answer.>');
  });
});
