import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { tempDir } from '../helpers/gateway.ts';
import { useGatewayProcesses } from '../helpers/process.ts';
import { until } from '../helpers/wait.ts';

/** SPEC §17: a due time runs once, whatever a kill -9 around it cuts. */
describe('SIGKILL around a job due time', { timeout: 90_000 }, () => {
  let tmp: ReturnType<typeof tempDir>;
  let openai: FakeOpenAI;
  let telegram: FakeTelegram;
  let hold = true;
  beforeEach(async () => {
    tmp = tempDir();
    hold = true;
    // While `hold`, the model answers only after a long while: the kill falls in the middle of the job's turn.
    openai = await startFakeOpenAI(() => (hold ? { content: 'late', delayMs: 60_000 } : { content: 'Time to stretch.' }));
    telegram = await startFakeTelegram();
  });
  afterEach(async () => {
    await telegram.close();
    await openai.close();
    tmp.remove();
  });
  const gateways = useGatewayProcesses();

  it('a one-off job killed mid-turn is answered exactly once after the restart, and not run a third time', async () => {
    const due = new Date(Date.now() + 4000).toISOString();
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
      providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0, timeoutMs: 120_000 } },
      channels: { telegram: { dmPolicy: 'open' } }, agents: { defaults: { tools: { preset: 'none' } } },
      jobs: [{ id: 'stretch', schedule: due, prompt: 'remind me to stretch', deliverTo: { channel: 'telegram', peer: '42' } }],
    }));
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    const first = gateways.start(tmp.dir, env);
    await first.url;
    await until(() => openai.requests.length >= 1, 'the job turn to reach the model');
    first.child.kill('SIGKILL');
    await first.exited;
    expect(telegram.callsOf('sendMessage')).toHaveLength(0);

    hold = false;
    const second = gateways.start(tmp.dir, env);
    await second.url;
    await until(() => telegram.callsOf('sendMessage').some((c) => c.response.ok), 'the reminder after the restart');
    const sent = () => telegram.callsOf('sendMessage').filter((c) => c.response.ok && String(c.body.text) === 'Time to stretch.');
    expect(sent()).toHaveLength(1);
    expect(String(sent()[0]!.body.chat_id)).toBe('42');
    second.child.kill('SIGTERM');
    await second.exited;

    // A third start finds the due time run: nothing is sent or asked again.
    const asked = openai.requests.length;
    const third = gateways.start(tmp.dir, env);
    await third.url;
    await until(async () => (await fetch(`${await third.url}/readyz`)).ok, 'the third start to be ready');
    expect(openai.requests.length).toBe(asked);
    expect(sent()).toHaveLength(1);
  });
});
