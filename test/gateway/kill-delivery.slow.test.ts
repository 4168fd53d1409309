import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeOpenAI, userText, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { tempDir } from '../helpers/gateway.ts';
import { useGatewayProcesses } from '../helpers/process.ts';
import { dm } from '../channels/telegram/updates.ts';
import { until } from '../helpers/wait.ts';

/** SPEC §16: a reply stays journaled until the platform takes it, across a kill -9 in the middle of its retries. */
describe('SIGKILL while replies are being retried', { timeout: 60_000 }, () => {
  let tmp: ReturnType<typeof tempDir>;
  let openai: FakeOpenAI;
  let telegram: FakeTelegram;
  beforeEach(async () => {
    tmp = tempDir();
    openai = await startFakeOpenAI((r) => ({ content: `echo: ${userText(r.body.messages.at(-1)!.content)}`, usage: null }));
    telegram = await startFakeTelegram();
  });
  afterEach(async () => {
    await telegram.close();
    await openai.close();
    tmp.remove();
  });
  // Registered after the hook above, so it runs first: the processes die before the fakes close.
  const gateways = useGatewayProcesses();

  it('replies the Bot API never took before the kill are sent after the restart, each once, without asking the model again', async () => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
      providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } },
      agents: { defaults: { tools: { preset: 'none' } } },
      // Retries for a long while, so the kill falls in the middle of them.
      delivery: { maxAttempts: 50, retryBaseMs: 20, retryMaxMs: 50 },
    }));
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    const users = [201, 202, 203, 204].map((id) => ({ id, is_bot: false, first_name: `U${id}` }));
    const texts = users.map((_u, i) => `stuck reply ${i}`);

    // The Bot API takes no send: every reply is being retried when the process dies.
    telegram.resetConnection = (method) => method === 'sendMessage';
    const first = gateways.start(tmp.dir, env);
    await first.url;
    for (const [i, from] of users.entries()) telegram.pushUpdate(dm(texts[i]!, { from }));
    await until(() => telegram.resets >= 3 * users.length, 'every reply to be cut a few times', 6000);
    first.child.kill('SIGKILL');
    await first.exited;
    expect(telegram.callsOf('sendMessage')).toHaveLength(0);
    const modelCalls = openai.requests.length;
    expect(modelCalls).toBe(users.length);

    telegram.resetConnection = undefined;
    const second = gateways.start(tmp.dir, env);
    await second.url;
    const answered = (text: string) => telegram.callsOf('sendMessage').filter((c) => c.response.ok && String(c.body.text) === `echo: ${text}`);
    await until(() => texts.every((t) => answered(t).length > 0), 'every reply after the restart', 6000);
    for (const text of texts) expect(answered(text), text).toHaveLength(1);
    // The answers were in the transcripts: the replay sent them without calling the model again.
    expect(openai.requests.length).toBe(modelCalls);
  });
});
