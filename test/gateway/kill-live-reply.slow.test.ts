import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { renderOutbound } from '../../channels/telegram/render.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { tempDir } from '../helpers/gateway.ts';
import { startProcess } from '../helpers/process.ts';
import { dm } from '../channels/telegram/updates.ts';

async function until(condition: () => boolean, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('a live reply cut short by kill -9 (SPEC §16)', () => {
  let tmp: ReturnType<typeof tempDir>;
  let openai: FakeOpenAI;
  let telegram: FakeTelegram;
  const procs: ReturnType<typeof startProcess>[] = [];
  beforeEach(async () => {
    tmp = tempDir();
    telegram = await startFakeTelegram();
  });
  afterEach(async () => {
    for (const p of procs.splice(0)) { p.child.kill('SIGKILL'); await p.exited; }
    await telegram.close();
    await openai.close();
    tmp.remove();
  });

  it('is finished after the restart by editing the message already posted, never by a second copy', async () => {
    const answer = Array.from({ length: 200 }, (_, i) => (i % 9 === 4 ? `**w${i}**` : `w${i}`)).join(' ');
    // The first run streams slowly (killed mid-stream); the replay's answer comes at the usual pace.
    let calls = 0;
    openai = await startFakeOpenAI(() => ({ content: answer, chunkDelayMs: ++calls === 1 ? 50 : 2, usage: null }));
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
      providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      channels: { telegram: { dmPolicy: 'open', streaming: { direct: 'partial', intervalMs: 300 } } },
      agents: { defaults: { tools: { preset: 'none' } } },
    }));
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    const first = startProcess(tmp.dir, env);
    procs.push(first);
    await first.url;
    telegram.pushUpdate(dm('a long one please'));
    // Posted and edited at least once (the post's id is journaled before the first edit goes out).
    await until(() => telegram.callsOf('editMessageText').some((c) => c.response.ok), 'a live edit');
    first.child.kill('SIGKILL');
    await first.exited;
    const posted = telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === 42);
    expect(posted).toHaveLength(1);
    const shownBefore = telegram.shown.get('42:5000')!.text;
    expect(shownBefore.length).toBeLessThan(renderOutbound({ text: answer })[0]!.length);
    const journal = readFileSync(path.join(tmp.dir, 'data', 'inbox.jsonl'), 'utf8');
    expect(journal).toContain('"op":"live"');

    const second = startProcess(tmp.dir, env);
    procs.push(second);
    await second.url;
    const final = renderOutbound({ text: answer })[0]!;
    await until(() => telegram.shown.get('42:5000')?.text === final, 'the posted message to show the whole answer');
    await new Promise((r) => setTimeout(r, 300));
    // No second copy: still the one message, now the complete answer.
    expect(telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === 42)).toHaveLength(1);
    expect([...telegram.shown.keys()].filter((k) => k.startsWith('42:'))).toEqual(['42:5000']);
  }, 90_000);
});
