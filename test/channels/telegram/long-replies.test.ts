import { Api } from 'grammy';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { deliverMessage } from '../../../channels/telegram/deliver.ts';
import { ChannelError } from '../../../src/core/errors.ts';
import type { DeliveryTarget } from '../../../src/core/message.ts';
import { parseTelegramHtml, startFakeTelegram, type FakeTelegram, type TelegramCall } from '../../fakes/fake-telegram.ts';

const target: DeliveryTarget = { channel: 'telegram', accountId: 'default', chatId: '42', chatType: 'direct' };
const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** The text a user sees for each message Telegram accepted, in order; fails on HTML Telegram would refuse. */
function shown(calls: TelegramCall[]): string[] {
  return calls.filter((c) => c.response.ok).map((c) => {
    if (c.body.parse_mode !== 'HTML') return String(c.body.text);
    const parsed = parseTelegramHtml(String(c.body.text));
    if ('error' in parsed) throw new Error(parsed.error);
    return parsed.text;
  });
}

const squeeze = (s: string) => s.replace(/\s+/g, '');

/** Prose of `words` numbered words, so that order and completeness can be checked. */
const prose = (prefix: string, words: number) => Array.from({ length: words }, (_, i) => `${prefix}${i}`).join(' ');

describe('Telegram long replies through grammy and the fake Bot API', () => {
  let telegram: FakeTelegram;
  let api: Api;
  beforeEach(async () => {
    telegram = await startFakeTelegram();
    api = new Api(telegram.token, { apiRoot: telegram.apiRoot });
  });
  afterEach(async () => {
    await telegram.close();
  });
  const sends = () => telegram.callsOf('sendMessage');

  it('a link to a 5,000-character URL becomes its text plus the URL, in a few messages Telegram accepts', async () => {
    const url = `https://example.com/${'segment/'.repeat(625)}`;
    await deliverMessage(api, target, { text: `Read [the report](${url}) first.\n\nThen ${url} again.` });
    expect(sends().every((c) => c.response.ok)).toBe(true);
    const texts = shown(sends());
    expect(texts.length).toBeLessThanOrEqual(5);
    for (const t of texts) expect(t.length).toBeLessThanOrEqual(4096);
    expect(squeeze(texts.join(''))).toBe(squeeze(`Read the report (${url}) first.Then ${url} again.`));
  });

  it('a link whose text is longer than a message is closed and reopened, each part a link to the same URL', async () => {
    const label = prose('w', 1200);
    await deliverMessage(api, target, { text: `[${label}](https://example.com/doc)` });
    const html = sends().map((c) => String(c.body.text));
    expect(html.length).toBeGreaterThan(1);
    for (const h of html) expect(h).toMatch(/^<a href="https:\/\/example\.com\/doc">[^<]+<\/a>$/);
    expect(shown(sends()).join(' ').split(/\s+/)).toEqual(label.split(' '));
  });

  it('never cuts a ZWJ emoji, a flag or a skin tone in an unbroken run', async () => {
    const run = ['👨‍👩‍👧‍👦', '🇫🇷', '👍🏿', '🏳️‍🌈'].join('').repeat(400);
    await deliverMessage(api, target, { text: run });
    const texts = shown(sends());
    expect(texts.length).toBeGreaterThan(1);
    expect(texts.join('')).toBe(run);
    for (const [i, t] of texts.entries()) {
      expect(t.length).toBeLessThanOrEqual(4096);
      if (i > 0) expect([...segmenter.segment(texts[i - 1]!.slice(-12) + t.slice(0, 12))].map((s) => s.index)).toContain(texts[i - 1]!.slice(-12).length);
    }
  });

  it('"message is too long" on a part: that part is split smaller and sent again as HTML, and the rest follows', async () => {
    const first = `**${prose('a', 500)}**`;
    const text = `${first}\n\n${prose('b', 500)}`;
    telegram.failNext('sendMessage', { error_code: 400, description: 'Bad Request: message is too long' }, (b) => String(b.text).includes('a0 '));
    await deliverMessage(api, target, { text });
    const calls = sends();
    expect(calls[0]!.response).toMatchObject({ ok: false, description: 'Bad Request: message is too long' });
    const retried = calls.slice(1).filter((c) => String(c.body.text).includes('a'));
    expect(retried.filter((c) => /\ba\d+/.test(String(c.body.text))).length).toBeGreaterThanOrEqual(2);
    for (const c of calls.slice(1)) {
      expect(c.response.ok).toBe(true);
      expect(c.body.parse_mode).toBe('HTML');
    }
    expect(String(calls[1]!.body.text).startsWith('<b>a0 ')).toBe(true);
    expect(shown(calls).join(' ').split(/\s+/)).toEqual(text.replace(/\*/g, '').split(/\s+/));
  });

  it('any other 400 on a part: split smaller once, then plain text for what still fails; the rest is still delivered', async () => {
    const text = `${prose('a', 600)}\n\n${prose('b', 600)}`;
    const refuse = { error_code: 400, description: 'Bad Request: something about this part' };
    for (let i = 0; i < 3; i++) telegram.failNext('sendMessage', refuse, (b) => b.parse_mode === 'HTML' && String(b.text).includes(' a1'));
    await deliverMessage(api, target, { text });
    const calls = sends();
    // The whole a… message, then the smaller part holding a1…; that part goes as plain text, not split again.
    expect(calls.filter((c) => !c.response.ok)).toHaveLength(2);
    const plain = calls.filter((c) => c.response.ok && c.body.parse_mode === undefined);
    expect(plain.length).toBeGreaterThanOrEqual(1);
    expect(calls.at(-1)!.body.parse_mode).toBe('HTML'); // the b… part, untouched
    expect(shown(calls).join(' ').split(/\s+/)).toEqual(text.split(/\s+/));
  });

  it('a part refused even as plain text does not stop the rest; the failure is reported at the end', async () => {
    const text = `${prose('a', 600)}\n\n${prose('b', 600)}`;
    const refuse = { error_code: 400, description: 'Bad Request: chat has a problem with a' };
    for (let i = 0; i < 20; i++) telegram.failNext('sendMessage', refuse, (b) => String(b.text).includes('a1 '));
    const error = await deliverMessage(api, target, { text }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChannelError);
    expect((error as ChannelError).code).toBe('TELEGRAM_SEND_FAILED');
    expect((error as ChannelError).message).toContain('chat has a problem with a');
    const delivered = shown(sends()).join(' ');
    expect(delivered).toContain('b0 b1 b2');
    expect(delivered).toContain('b599');
  });

  it('a network failure is not a refusal of the text: it is thrown at once', async () => {
    const dead = new Api(telegram.token, { apiRoot: 'http://127.0.0.1:9' });
    await expect(deliverMessage(dead, target, { text: 'hello' })).rejects.not.toBeInstanceOf(ChannelError);
  });

  it('a chat that refuses everything ("not enough rights") costs a few sends per message, not one per character of a long link', async () => {
    const url = `https://example.com/${'x'.repeat(1500)}`;
    const text = `${prose('a', 500)} [the docs](${url}) ${prose('b', 500)}`;
    const refuse = { error_code: 400, description: 'Bad Request: not enough rights to send text messages to the chat' };
    for (let i = 0; i < 200; i++) telegram.failNext('sendMessage', refuse);
    const error = await deliverMessage(api, target, { text }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChannelError);
    expect((error as ChannelError).message).toContain('not enough rights');
    // 2 messages: each refused whole, in 2 halves, then as plain text (at most 2 parts each).
    expect(sends().length).toBeLessThanOrEqual(14);
    expect((error as ChannelError).message).toMatch(/^Telegram refused \d+ parts of a reply to 42/);
  });

  it('after a part failed for good, a later message refused as too long is still split smaller and sent as HTML', async () => {
    const text = `**${prose('a', 600)}**\n\n**${prose('b', 600)}**`;
    for (let i = 0; i < 6; i++) telegram.failNext('sendMessage', { error_code: 400, description: 'Bad Request: chat has a problem with a' }, (b) => String(b.text).includes('a1 '));
    telegram.failNext('sendMessage', { error_code: 400, description: 'Bad Request: message is too long' }, (b) => String(b.text).includes('b0 '));
    const error = await deliverMessage(api, target, { text }).catch((e: unknown) => e);
    expect((error as ChannelError).message).toMatch(/^Telegram refused 1 part of a reply to 42 even as plain text/);
    const b = sends().filter((c) => c.response.ok && /\bb\d+/.test(String(c.body.text)));
    expect(b.length).toBeGreaterThanOrEqual(2);
    for (const c of b) expect(c.body.parse_mode).toBe('HTML');
    expect(String(b[0]!.body.text).startsWith('<b>b0 ')).toBe(true);
  });

  it('the plain-text fallback keeps each link as its text and URL', async () => {
    telegram.failNext('sendMessage', { error_code: 400, description: "Bad Request: can't parse entities: unsupported start tag" }, (b) => b.parse_mode === 'HTML');
    await deliverMessage(api, target, { text: 'Read [the docs](https://example.com/d?a=1&b=2) and https://example.com/bare now.' });
    const calls = sends();
    expect(calls).toHaveLength(2);
    expect(calls[1]!.body.parse_mode).toBeUndefined();
    expect(calls[1]!.body.text).toBe('Read the docs (https://example.com/d?a=1&b=2) and https://example.com/bare now.');
  });
});

