// SPEC §16 across replicas: a live reply cut short by kill -9 is finished by the replica that takes the session over,
// by editing the message already posted, never by a second copy (the posted ids are journaled in sb_inbox).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { renderOutbound } from '../../channels/telegram/render.ts';
import { dm } from '../channels/telegram/updates.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { startProcess } from '../helpers/process.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase({ migrate: false });

describePg('cluster mode: a live reply cut short by kill -9 (SPEC §16)', () => {
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

  it('is finished by the other replica editing the message already posted, never by a second copy', async () => {
    const answer = Array.from({ length: 200 }, (_, i) => (i % 9 === 4 ? `**w${i}**` : `w${i}`)).join(' ');
    // The first attempt streams slowly (killed mid-stream); the other replica's answer comes at the usual pace.
    let calls = 0;
    openai = await startFakeOpenAI(() => ({ content: answer, chunkDelayMs: ++calls === 1 ? 50 : 2, usage: null }));
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    const start = (id: string) => {
      const dir = path.join(tmp.dir, id);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'switchboard.json'), JSON.stringify({
        store: db.uri, cluster: { replicaId: id, pollMs: 200 },
        providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        channels: { telegram: { dmPolicy: 'open', streaming: { direct: 'partial', intervalMs: 300 } } },
        agents: { defaults: { tools: { preset: 'none' } } },
      }));
      const proc = startProcess(dir, env);
      procs.push(proc);
      return proc;
    };
    // The first replica holds the Telegram lease (it started first), so it accepts and runs the message.
    const first = start('ra');
    await first.url;
    const second = start('rb');
    await second.url;
    telegram.pushUpdate(dm('a long one please'));
    await until(() => telegram.callsOf('editMessageText').some((c) => c.response.ok), 'a live edit');
    await until(async () => (await db.pool.query('SELECT 1 FROM sb_inbox WHERE live IS NOT NULL')).rowCount === 1, 'the posted id journaled');
    first.child.kill('SIGKILL');
    await first.exited;
    expect(telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === 42)).toHaveLength(1);
    expect(telegram.shown.get('42:5000')!.text.length).toBeLessThan(renderOutbound({ text: answer })[0]!.length);

    const final = renderOutbound({ text: answer })[0]!;
    await until(() => telegram.shown.get('42:5000')?.text === final, 'the posted message to show the whole answer');
    await until(async () => (await db.pool.query('SELECT 1 FROM sb_inbox WHERE done_at IS NOT NULL')).rowCount === 1, 'the message done');
    // No second copy: still the one message, now the complete answer, finished by the other replica.
    expect(telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === 42)).toHaveLength(1);
    expect([...telegram.shown.keys()].filter((k) => k.startsWith('42:'))).toEqual(['42:5000']);
    expect(second.lines.some((l) => l.includes('running again a message whose earlier attempt did not finish'))).toBe(true);
  }, 90_000);
});
