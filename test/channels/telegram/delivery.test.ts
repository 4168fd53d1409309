import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramChannel } from '../../../channels/telegram/index.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { createLogger, silentLogger } from '../../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../../src/main.ts';
import { lastUser, startFakeOpenAI } from '../../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { tempDir, testConfig } from '../../helpers/gateway.ts';
import { sentTo, sessionKeys, startTelegramGateway, telegramConfig } from './harness.ts';
import { ALICE, dm } from './updates.ts';

const SECRET = 'hook-secret_123';

/** Waits (bounded) until a condition holds. */
async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('Telegram delivery: webhook mode, redeliveries, bad updates, bad tokens', () => {
  let telegram: FakeTelegram;
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
    tmp.remove();
  });

  const post = (update: unknown, secret?: string) => fetch(`${gw!.url}/webhooks/telegram/default`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(secret === undefined ? {} : { 'X-Telegram-Bot-Api-Secret-Token': secret }) },
    body: JSON.stringify(update),
  });

  it('webhook mode: a wrong or missing secret gets 401 and nothing is processed; the right one is answered; nothing polls', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig({ mode: 'webhook', webhookSecret: SECRET }, { session: { dmScope: 'per-channel-peer' } }) });
    const wrong = await post({ update_id: 500, ...dm('sneaky') }, 'not-the-secret');
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
    expect((await post({ update_id: 501, ...dm('sneaky too') })).status).toBe(401);
    expect(gw.gateway.stats.accepted + gw.gateway.stats.blocked + gw.gateway.stats.skipped).toBe(0);
    expect(await sessionKeys(gw)).toEqual([]);

    const right = await post({ update_id: 502, ...dm('hello by webhook') }, SECRET);
    expect(right.status).toBe(200);
    const reply = await telegram.waitFor('sendMessage');
    expect(reply.body).toMatchObject({ chat_id: 42, parse_mode: 'HTML' });
    expect(reply.body.text).toContain('You said: "hello by webhook"');
    expect(await sessionKeys(gw)).toEqual(['agent:main:telegram:direct:42']);
    expect(telegram.callsOf('getMe')).toHaveLength(1);
    expect(telegram.callsOf('getUpdates')).toHaveLength(0);
    expect(telegram.callsOf('deleteWebhook')).toHaveLength(0);
    expect(sentTo(telegram, 42)).toHaveLength(1);
  });

  it('webhook mode: the same update delivered twice is answered once', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig({ mode: 'webhook', webhookSecret: SECRET }) });
    const update = { update_id: 700, ...dm('only once please') };
    expect((await post(update, SECRET)).status).toBe(200);
    expect((await post(update, SECRET)).status).toBe(200);
    expect((await post({ update_id: 701, ...dm('and then this') }, SECRET)).status).toBe(200);
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('and then this'));
    expect(sentTo(telegram, 42).filter((c) => String(c.body.text).includes('only once please'))).toHaveLength(1);
    expect(gw.gateway.stats.duplicates).toBe(1);
  });

  it('webhook mode needs a webhook secret: the channel does not start, the gateway does', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig({ mode: 'webhook' }) });
    const adapter = gw.adapters.find((a) => a.id === 'telegram')!;
    expect(adapter.status).toBe('failed');
    expect(adapter.statusDetail).toMatch(/webhookSecret/);
    expect((await post({ update_id: 1, ...dm('x') }, '')).status).toBe(401);
  });

  it('webhook mode registers the route with setWebhook (secret_token included) when the public URL is known', async () => {
    const config = testConfig(tmp.dir, telegramConfig({ mode: 'webhook', webhookSecret: SECRET }), { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    const account = config.channels.telegram[0]!;
    const adapter = createTelegramChannel({ account, clock: systemClock, logger: silentLogger(), stateDir: config.stateDir, publicUrl: 'https://bot.example.com/' });
    gw = await startGateway({ config, logger: silentLogger(), adapters: [adapter] });
    const registered = await telegram.waitFor('setWebhook');
    expect(registered.body).toEqual({ url: 'https://bot.example.com/webhooks/telegram/default', secret_token: SECRET, allowed_updates: ['message'] });
    expect((await post({ update_id: 1, ...dm('via the registered hook') }, SECRET)).status).toBe(200);
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('via the registered hook'));
  });

  it('polling: a redelivered update_id is answered once, also after a restart on the same state folder', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig() });
    const first = { update_id: 900, ...dm('answer me once') };
    telegram.pushUpdate(first);
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('answer me once'));
    telegram.redeliver(first);
    telegram.pushUpdate({ update_id: 901, ...dm('second') });
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('"second"'));
    await gw.stop();

    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig() });
    telegram.redeliver(first);
    telegram.pushUpdate({ update_id: 902, ...dm('third') });
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('"third"'));
    const texts = sentTo(telegram, ALICE.id).map((c) => String(c.body.text));
    expect(texts.filter((t) => t.includes('answer me once'))).toHaveLength(1);
    expect(texts).toHaveLength(3);
  });

  it('an update that arrives while the gateway shuts down is not confirmed, and is answered after the restart', async () => {
    const openai = await startFakeOpenAI((r) => ({ content: `re: ${lastUser(r)}` }));
    try {
      openai.script.push({ content: 'slow answer', delayMs: 600 });
      const start = () => startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig() });
      gw = await start();
      telegram.pushUpdate(dm('take your time'));
      await until(() => openai.requests.length === 1);
      const stopping = gw.stop();
      telegram.pushUpdate(dm('arrived during shutdown'));
      await stopping;
      expect(sentTo(telegram, 42).map((c) => c.body.text)).toEqual(['slow answer']); // the running turn finished

      gw = await start();
      await telegram.waitFor('sendMessage', (c) => c.body.text === 're: arrived during shutdown');
      expect(sentTo(telegram, 42).map((c) => c.body.text)).toEqual(['slow answer', 're: arrived during shutdown']);
    } finally {
      await gw?.stop();
      await openai.close();
    }
  });

  it('one bad update never stops polling', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig() });
    telegram.pushUpdate({ message: { message_id: 1, date: 1 } }); // no chat, no sender: cannot be normalized
    telegram.pushUpdate({ edited_message: dm('edited text').message }); // ignored on purpose
    telegram.pushUpdate({ channel_post: { message_id: 2, date: 1, chat: { id: -100777, type: 'channel', title: 'news' }, text: 'post' } });
    telegram.pushUpdate(dm('still there?'));
    const reply = await telegram.waitFor('sendMessage');
    expect(reply.body.text).toContain('You said: "still there?"');
    expect(telegram.callsOf('sendMessage')).toHaveLength(1);
    expect(gw.adapters.find((a) => a.id === 'telegram')?.status).toBe('running');
  });

  it('a bad token gives one clear line without the token, and the gateway keeps serving', async () => {
    const lines: string[] = [];
    const out = new PassThrough();
    out.on('data', (chunk: Buffer) => lines.push(...chunk.toString().trim().split('\n')));
    const badToken = '999999:definitely-not-valid';
    gw = await startTelegramGateway({
      dir: tmp.dir, telegram, env: { TELEGRAM_BOT_TOKEN: badToken }, config: telegramConfig(),
      logger: createLogger({ level: 'info', destination: out, secrets: [badToken] }),
    });
    const adapter = gw.adapters.find((a) => a.id === 'telegram')!;
    expect(adapter.status).toBe('failed');
    expect(adapter.statusDetail).toBe('Telegram rejected TELEGRAM_BOT_TOKEN (401): create a bot with @BotFather and put its token in .env');
    expect(await (await fetch(`${gw.url}/healthz`)).json()).toEqual({ ok: true });
    expect((await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'u', text: 'hi' }) })).status).toBe(200);
    const errorLines = lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level >= 50);
    expect(errorLines.map((l) => l.msg)).toEqual(['channel telegram/default did not start: Telegram rejected TELEGRAM_BOT_TOKEN (401): create a bot with @BotFather and put its token in .env']);
    expect(lines.join('\n')).not.toContain('definitely-not-valid');
    expect(telegram.callsOf('getUpdates')).toHaveLength(0);
  });

  it('an unreachable Bot API gives one clear line naming the API root', async () => {
    const root = telegram.apiRoot;
    await telegram.close();
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, env: { TELEGRAM_API_ROOT: root }, config: telegramConfig() });
    const adapter = gw.adapters.find((a) => a.id === 'telegram')!;
    expect(adapter.status).toBe('failed');
    expect(adapter.statusDetail).toMatch(new RegExp(`^Could not reach the Telegram Bot API at ${root} \\(ECONNREFUSED\\)`));
    expect(adapter.statusDetail).not.toContain(telegram.token);
    telegram = await startFakeTelegram(); // for afterEach
  });
});
