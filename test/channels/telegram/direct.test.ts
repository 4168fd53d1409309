import sharp from 'sharp';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/core/clock.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { PairingStore } from '../../../src/routing/pairing.ts';
import { lastUser, startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { parseTelegramHtml, startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { sentTo, sessionKeys, startTelegramGateway, telegramConfig } from './harness.ts';
import { ALICE, BOB, dm } from './updates.ts';

describe('Telegram private chats through the gateway (real grammy, fake Bot API)', () => {
  let telegram: FakeTelegram;
  let openai: FakeOpenAI | undefined;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;

  beforeEach(async () => {
    telegram = await startFakeTelegram();
    tmp = tempDir();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await telegram.close();
    await openai?.close();
    openai = undefined;
    tmp.remove();
  });

  it.each([
    ['main', 'agent:main:main'],
    ['per-peer', 'agent:main:direct:42'],
    ['per-channel-peer', 'agent:main:telegram:direct:42'],
    ['per-account-channel-peer', 'agent:main:telegram:default:direct:42'],
  ])('answers a private message under dmScope %s with session key %s', async (dmScope, key) => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig({}, { session: { dmScope } }) });
    telegram.pushUpdate(dm('hello bot'));
    const reply = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === 42);
    expect(reply.body.parse_mode).toBe('HTML');
    expect(reply.body.text).toContain('You said: "hello bot"');
    expect(reply.body.reply_parameters).toBeUndefined(); // no quote in a one-to-one chat
    expect(await sessionKeys(gw)).toEqual([key]);
    // The typing indicator was shown in that chat while the turn ran.
    expect(telegram.callsOf('sendChatAction').map((c) => c.body)).toContainEqual({ chat_id: 42, action: 'typing' });
  });

  it('checks the token with getMe, polls, and registers the chat commands with setMyCommands', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig() });
    const commands = await telegram.waitFor('setMyCommands');
    const names = (commands.body.commands as { command: string; description: string }[]).map((c) => c.command);
    expect(names).toEqual(expect.arrayContaining(['new', 'reset', 'status', 'usage', 'stop', 'help']));
    expect(names.every((n) => /^[a-z0-9_]{1,32}$/.test(n))).toBe(true);
    expect(telegram.calls[0]?.method).toBe('getMe');
    await telegram.waitFor('getUpdates', (c) => c.body.timeout > 0);
    expect(gw.adapters.find((a) => a.id === 'telegram')?.status).toBe('running');
  });

  it('answers /status at once in a private chat (a bare command addresses the bot)', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig({}, { session: { dmScope: 'per-channel-peer' } }) });
    telegram.pushUpdate(dm('/status'));
    const reply = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === 42);
    expect(reply.body.text).toContain('agent:main:telegram:direct:42');
  });

  it('escapes <, > and & in replies', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig() });
    telegram.pushUpdate(dm('is a < b && c > d? <b>not bold</b>'));
    const reply = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === 42);
    expect(reply.response.ok).toBe(true);
    expect(reply.body.text).toContain('is a &lt; b &amp;&amp; c &gt; d? &lt;b&gt;not bold&lt;/b&gt;');
    expect(parseTelegramHtml(reply.body.text)).toMatchObject({ text: expect.stringContaining('is a < b && c > d? <b>not bold</b>') });
  });

  it("resends as plain text when Telegram answers \"can't parse entities\"", async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig() });
    telegram.failNext('sendMessage', { error_code: 400, description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 3" }, (b) => b.parse_mode === 'HTML');
    telegram.pushUpdate(dm('fish & <chips>'));
    const plain = await telegram.waitFor('sendMessage', (c) => c.response.ok);
    const [failed] = telegram.callsOf('sendMessage');
    expect(failed?.response).toMatchObject({ ok: false, error_code: 400 });
    expect(failed?.body.parse_mode).toBe('HTML');
    expect(plain.body.parse_mode).toBeUndefined();
    expect(plain.body.text).toContain('You said: "fish & <chips>"');
    expect(plain.body.text).not.toContain('&amp;');
  });

  it('splits a reply longer than 4096 characters without breaking its code block', async () => {
    const code = Array.from({ length: 260 }, (_, i) => `console.log("line ${i}", a < b && c > d);`).join('\n');
    const answer = `Here is the script:\n\n\`\`\`js\n${code}\n\`\`\`\n\nRun it with **node**.`;
    openai = await startFakeOpenAI(() => ({ content: answer }));
    // Sent whole, not streamed (test/channels/telegram/live.test.ts streams long replies).
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig({ streaming: 'off' }) });
    telegram.pushUpdate(dm('write me a long script'));
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('<b>node</b>'));
    const parts = sentTo(telegram, 42);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    expect(telegram.callsOf('sendMessage').every((c) => c.response.ok)).toBe(true); // no 400 from the strict fake: every part balanced
    const visible = parts.map((p) => {
      const parsed = parseTelegramHtml(p.body.text);
      if (!('text' in parsed)) throw new Error(parsed.error);
      expect(parsed.text.length).toBeLessThanOrEqual(4096); // Telegram counts the text after entity parsing
      return parsed.text;
    });
    const codeParts = parts.filter((p) => p.body.text.includes('<pre>'));
    expect(codeParts.length).toBeGreaterThanOrEqual(2);
    for (const p of codeParts) {
      expect(p.body.text.startsWith('<pre><code class="language-js">')).toBe(true);
      expect(p.body.text.endsWith('</code></pre>') || p.body.text.includes('</code></pre>\n\n')).toBe(true);
    }
    // Every code line arrives whole, in order, exactly once.
    const lines = visible.join('\n').split('\n').filter((l) => l.startsWith('console.log'));
    expect(lines).toEqual(code.split('\n'));
    expect(visible[0]).toBe('Here is the script:');
  });

  it('retries a reply after the retry_after of a 429', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig() });
    // A fraction of a second (auto-retry waits 1000 × retry_after ms), so the test does not wait a real second.
    telegram.failNext('sendMessage', { error_code: 429, description: 'Too Many Requests: retry after 0.05', parameters: { retry_after: 0.05 } });
    telegram.pushUpdate(dm('are you there?'));
    const ok = await telegram.waitFor('sendMessage', (c) => c.response.ok);
    const [limited] = telegram.callsOf('sendMessage');
    expect(limited?.response.error_code).toBe(429);
    expect(ok.body.text).toBe(limited?.body.text);
    expect(ok.at - limited!.at).toBeGreaterThanOrEqual(45);
    expect(telegram.callsOf('sendMessage')).toHaveLength(2);
  });

  it('pairing: an unknown sender gets a code; once approved (the CLI path) the next message is answered', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: { channels: { telegram: { dmPolicy: 'pairing' } } } });
    telegram.pushUpdate(dm('hi, who are you?'));
    const prompt = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === 42);
    const code = /pairing code: ([A-Z0-9]{8})/.exec(prompt.body.text)?.[1];
    expect(code).toBeDefined();
    expect(prompt.body.text).toContain(`switchboard pairing approve telegram ${code}`);
    expect(await sessionKeys(gw)).toEqual([]);

    const cli = new PairingStore({ uri: gw.config.store, clock: new ManualClock(Date.now()) });
    try {
      expect(await cli.approve('telegram', code!)).toMatchObject({ peerId: '42', name: 'Alice Liddell' });
    } finally {
      await cli.close();
    }
    telegram.pushUpdate(dm('hello again'));
    const answer = await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('You said: "hello again"'));
    expect(answer.body.chat_id).toBe(42);
    // Someone else still gets a code, not an answer.
    telegram.pushUpdate(dm('me too', { from: BOB }));
    const other = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === BOB.id);
    expect(other.body.text).toMatch(/pairing code: [A-Z0-9]{8}/);
    expect(sentTo(telegram, ALICE.id)).toHaveLength(2);
  });

  it('sends the caption and the largest size of a photo to the agent', async () => {
    openai = await startFakeOpenAI((r) => ({ content: `got: ${lastUser(r)}` }));
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig() });
    const update = dm('');
    const { text: _text, ...message } = update.message;
    const big = await sharp({ create: { width: 900, height: 900, channels: 3, background: '#884422' } }).jpeg().toBuffer();
    telegram.addFile({ fileId: 'big', bytes: big, path: 'photos/file_9.jpg' });
    telegram.pushUpdate({ message: { ...message, caption: 'my cat', photo: [{ file_id: 'small', file_unique_id: 's', width: 90, height: 90, file_size: 1000 }, { file_id: 'big', file_unique_id: 'b', width: 900, height: 900, file_size: big.length }] } });
    await telegram.waitFor('sendMessage', (c) => c.body.chat_id === 42);
    // The largest size is fetched; a model not known to see (gpt-test) gets its line after the caption.
    expect(lastUser(openai.requests[0]!)).toMatch(/^my cat\n\[image: image\/jpeg 900×900, \d+ KB\]$/);
    expect(telegram.downloads.map((d) => d.path)).toEqual(['photos/file_9.jpg']);
  });
});
