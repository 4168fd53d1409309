import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { renderOutbound } from '../../../channels/telegram/render.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { parseTelegramHtml, startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { startTelegramGateway, telegramConfig } from './harness.ts';
import { dm, groupMessage } from './updates.ts';

const ALICE_CHAT = 42;
const GROUP = -1001234567890;

/** An answer of `n` words with markup spread through it (bold, code, a link), as a model writes. */
function answerOf(n: number): string {
  const words = Array.from({ length: n }, (_, i) => (i % 17 === 3 ? `**bold ${i}**` : i % 23 === 5 ? `\`code_${i}\`` : i % 31 === 7 ? `[link ${i}](https://example.com/${i})` : `word${i}`));
  return `${words.join(' ')}.`;
}

/** What the fake shows in each message the bot sent to a chat, in order of sending. */
function shownIn(telegram: FakeTelegram, chatId: number): string[] {
  return [...telegram.shown].filter(([key]) => key.startsWith(`${chatId}:`)).map(([, message]) => message.text);
}

async function until(condition: () => boolean, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('Telegram live replies through the gateway (SPEC §16; real grammy, fake Bot API, a model streaming at 30 tokens/s)', () => {
  let tmp: ReturnType<typeof tempDir>;
  let telegram: FakeTelegram;
  let openai: FakeOpenAI | undefined;
  let gw: RunningGateway | undefined;
  beforeEach(async () => {
    tmp = tempDir();
    telegram = await startFakeTelegram();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await openai?.close();
    openai = undefined;
    await telegram.close();
    tmp.remove();
  });

  it('partial (the DM default): posts once, edits as the answer grows, the final edit is the whole rendered answer', async () => {
    const answer = answerOf(90); // 90 tokens at 30/s: 3 s
    let askedAt = 0;
    openai = await startFakeOpenAI(() => { askedAt = Date.now(); return { content: answer, chunkDelayMs: 33 }; });
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig() });
    const rendered = renderOutbound({ text: answer });
    expect(rendered).toHaveLength(1);
    telegram.pushUpdate(dm('tell me something long'));
    await until(() => shownIn(telegram, ALICE_CHAT)[0] === rendered[0], 'the final edit');
    const posts = telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === ALICE_CHAT);
    const edits = telegram.callsOf('editMessageText');
    expect(posts).toHaveLength(1);
    expect(edits.length).toBeGreaterThanOrEqual(2);
    // About one edit a second over 3 s of streaming, plus the final one.
    expect(edits.length).toBeLessThanOrEqual(6);
    // Valid HTML at every step (the strict fake answers 400 to anything else), each a prefix of the answer growing.
    for (const call of [...posts, ...edits]) {
      expect(call.response.ok).toBe(true);
      expect('text' in parseTelegramHtml(String(call.body.text))).toBe(true);
    }
    // From the model's first token on: 40 characters come with the 7th token (~230 ms at 30 tokens/s), so the
    // first part is up well within the 1 s fallback (a whole answer sent at the end would show after ~3 s).
    const firstVisibleMs = posts[0]!.at - askedAt;
    expect(firstVisibleMs).toBeLessThan(1000);
    console.info(`[live] partial, 90 tokens at 30/s: 1 post, ${edits.length} edits, first visible text ${firstVisibleMs} ms after the model was asked, final edit after ${edits.at(-1)!.at - askedAt} ms`);
  });

  it('a long answer fills the first message and continues in new ones; each ends as its part of the rendered answer', async () => {
    const answer = answerOf(1400); // ~11,000 characters: three Telegram messages
    openai = await startFakeOpenAI(() => ({ content: answer, chunkDelayMs: 1 }));
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig({ streaming: { direct: 'partial', intervalMs: 150 } }) });
    const rendered = renderOutbound({ text: answer });
    expect(rendered.length).toBeGreaterThanOrEqual(3);
    telegram.pushUpdate(dm('tell me everything'));
    await until(() => shownIn(telegram, ALICE_CHAT).join('') === rendered.join(''), 'every part to show its final text', 40_000);
    expect(shownIn(telegram, ALICE_CHAT)).toEqual(rendered);
    expect(telegram.callsOf('editMessageText').length).toBeGreaterThanOrEqual(1);
    expect([...telegram.calls].every((c) => c.method === 'getUpdates' || c.response.ok || c.method === 'editMessageText')).toBe(true);
  });

  it('groups do not stream by default: one sendMessage, no edit, even for a slow answer', async () => {
    const answer = answerOf(45);
    openai = await startFakeOpenAI(() => ({ content: answer, chunkDelayMs: 33 }));
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig({ groups: [String(GROUP)] }) });
    telegram.pushUpdate(groupMessage(GROUP, '@switchboard_test_bot say a lot'));
    await telegram.waitFor('sendMessage', (c) => Number(c.body.chat_id) === GROUP, 20_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === GROUP)).toHaveLength(1);
    expect(telegram.callsOf('editMessageText')).toHaveLength(0);
    expect(telegram.callsOf('sendMessage').find((c) => Number(c.body.chat_id) === GROUP)!.body.text).toBe(renderOutbound({ text: answer })[0]);
  });

  it('progress: one status line ("thinking…", "running memory_search…") edited through the turn, then replaced by the answer', async () => {
    openai = await startFakeOpenAI();
    openai.script.push(
      { toolCalls: [{ id: 'call_1', name: 'memory_search', arguments: JSON.stringify({ query: 'deploy' }) }], delayMs: 1200 },
      { content: 'Nothing about the deploy in my notes.', delayMs: 1200 },
    );
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig({ streaming: { direct: 'progress', intervalMs: 200 } }) });
    telegram.pushUpdate(dm('what do you know about the deploy?'));
    const final = renderOutbound({ text: 'Nothing about the deploy in my notes.' })[0]!;
    await until(() => shownIn(telegram, ALICE_CHAT)[0] === final, 'the answer to replace the status line');
    const posts = telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === ALICE_CHAT);
    expect(posts.map((c) => c.body.text)).toEqual(['thinking…']);
    expect(telegram.callsOf('editMessageText').map((c) => c.body.text)).toEqual(['running memory_search…', 'thinking…', final]);
  });

  it('an edit Telegram answers 429 is sent again after its retry_after, and the answer still ends whole', async () => {
    const answer = answerOf(60);
    openai = await startFakeOpenAI(() => ({ content: answer, chunkDelayMs: 33 }));
    // Flood control: a second edit of the chat within 1.5 s is refused for 1 s; the live reply asks every 200 ms.
    telegram.editLimit = { minIntervalMs: 1500, retryAfter: 1 };
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig({ streaming: { intervalMs: 200 } }) });
    const rendered = renderOutbound({ text: answer })[0]!;
    telegram.pushUpdate(dm('go'));
    await until(() => shownIn(telegram, ALICE_CHAT)[0] === rendered, 'the final edit', 30_000);
    expect(telegram.editsLimited).toBeGreaterThanOrEqual(1);
    const edits = telegram.callsOf('editMessageText');
    // Never two edits at once: each refused edit is followed by its own retry, not by a newer edit.
    for (const [i, call] of edits.entries()) {
      if (call.response.ok) continue;
      expect(edits[i + 1]?.body.text).toBe(call.body.text);
      expect(edits[i + 1]!.at - call.at).toBeGreaterThanOrEqual(1000);
    }
    expect(telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === ALICE_CHAT)).toHaveLength(1);
  });
});
