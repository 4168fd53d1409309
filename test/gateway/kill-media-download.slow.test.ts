import { writeFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeOpenAI, userText, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { tempDir } from '../helpers/gateway.ts';
import { useGatewayProcesses } from '../helpers/process.ts';
import { dm } from '../channels/telegram/updates.ts';
import { until } from '../helpers/wait.ts';

/** SPEC §15: an accepted message whose media download a crash cut is replayed, fetched again and answered once. */
describe('SIGKILL during a media download', { timeout: 60_000 }, () => {
  let tmp: ReturnType<typeof tempDir>;
  let openai: FakeOpenAI;
  let telegram: FakeTelegram;
  beforeEach(async () => {
    tmp = tempDir();
    openai = await startFakeOpenAI((r) => ({ content: `seen ${r.images.length} image(s): ${userText(r.body.messages.at(-1)!.content)}`, usage: null }));
    telegram = await startFakeTelegram();
  });
  afterEach(async () => {
    await telegram.close();
    await openai.close();
    tmp.remove();
  });
  const gateways = useGatewayProcesses();

  it('a photo whose download was cut by kill -9 is downloaded again after the restart and answered exactly once, with the image', async () => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
      providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-4o', maxRetries: 0 } },
      channels: { telegram: { dmPolicy: 'open' } }, session: { reset: { mode: 'off' } },
      agents: { defaults: { tools: { preset: 'none' } } },
    }));
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    const bytes = await sharp({ create: { width: 900, height: 600, channels: 3, background: '#445566' } }).jpeg().toBuffer();
    // Served slowly: a few bytes at a time, so the kill falls in the middle of the download.
    const fileId = telegram.addFile({ bytes, contentType: 'image/jpeg', path: 'photos/file_1.jpg', chunkBytes: 256, chunkDelayMs: 20 });
    const update = dm('unused', { extra: { caption: 'what colour?', photo: [{ file_id: fileId, file_unique_id: 'u1', width: 900, height: 600, file_size: bytes.length }] } });
    delete (update.message as { text?: string }).text;

    const first = gateways.start(tmp.dir, env);
    await first.url;
    telegram.pushUpdate(update);
    await until(() => telegram.downloads.some((d) => d.bytesSent > 0), 'the download to be under way');
    first.child.kill('SIGKILL');
    await first.exited;
    expect(openai.requests).toHaveLength(0);
    expect(telegram.callsOf('sendMessage')).toHaveLength(0);

    // The next start serves the file at full speed.
    telegram.addFile({ bytes, contentType: 'image/jpeg', path: 'photos/file_1.jpg', fileId });
    const second = gateways.start(tmp.dir, env);
    await second.url;
    await until(() => telegram.callsOf('sendMessage').some((c) => c.response.ok), 'the answer after the restart');
    // Nothing more comes: the journal marked the message done.
    await until(() => openai.requests.length >= 1, 'the model call');
    const answers = telegram.callsOf('sendMessage').filter((c) => c.response.ok);
    expect(answers).toHaveLength(1);
    expect(String(answers[0]!.body.text)).toContain('seen 1 image(s)');
    expect(String(answers[0]!.body.text)).toContain('what colour?');
    expect(openai.requests).toHaveLength(1);
    expect(telegram.downloads.length).toBeGreaterThanOrEqual(2);
  });
});
