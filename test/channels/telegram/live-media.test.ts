import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { until } from '../../helpers/wait.ts';
import { startTelegramGateway, telegramConfig } from './harness.ts';
import { dm } from './updates.ts';

describe('Telegram: an image line in a streamed answer (SPEC §15, §16)', () => {
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
    await telegram.close();
    tmp.remove();
  });

  it('the live message ends with the text before the image; the photo and the rest follow in order, each once', async () => {
    const answer = `${'Here is the chart you asked for, drawn from the figures of last quarter. '.repeat(2)}\n\n![chart](https://example.com/c.png)\n\nDone.`;
    openai = await startFakeOpenAI(() => ({ content: answer, chunkDelayMs: 2 }));
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig({ streaming: { direct: 'partial', intervalMs: 100, minChars: 10 } }) });
    telegram.pushUpdate(dm('draw it'));
    await until(() => telegram.callsOf('sendMessage').some((c) => String(c.body.text) === 'Done.'), 'the text after the image');
    const posted = telegram.callsOf('sendMessage').filter((c) => c.response.ok);
    const photos = telegram.callsOf('sendPhoto').filter((c) => c.response.ok);
    // It was streamed: posted early and edited.
    expect(telegram.callsOf('editMessageText').length).toBeGreaterThan(0);
    expect(photos).toHaveLength(1);
    expect(photos[0]!.body.photo).toBe('https://example.com/c.png');
    // The streamed message (posted first, edited) ends as the text before the image, without the markdown image.
    const first = posted[0]!;
    const shown = [...telegram.shown.values()].map((m) => m.text);
    expect(shown[0]).toContain('Here is the chart');
    expect(shown[0]).not.toContain('![');
    expect(shown.some((t) => t.includes('example.com/c.png'))).toBe(false);
    expect(posted.at(-1)!.at).toBeGreaterThanOrEqual(photos[0]!.at);
    expect(photos[0]!.at).toBeGreaterThanOrEqual(first.at);
    expect(posted.filter((c) => String(c.body.text) === 'Done.')).toHaveLength(1);
  });
});
