import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramChannel } from '../../../channels/telegram/index.ts';
import { systemClock } from '../../../src/core/clock.ts';
import type { ChannelAdapter } from '../../../src/core/channel-adapter.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { capturingLogger } from '../../helpers/log-capture.ts';
import { tempDir, testConfig } from '../../helpers/gateway.ts';
import { startTelegramGateway, telegramConfig } from './harness.ts';
import { dm } from './updates.ts';
import { until } from '../../helpers/wait.ts';

/** Retries within milliseconds, so the tests do not wait out production backoff. */
const FAST_RETRIES = { delivery: { retryBaseMs: 1, retryMaxMs: 4 } };

describe('Telegram delivery: what the Bot API did not take is sent again (SPEC §16)', () => {
  let telegram: FakeTelegram;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;
  let channel: ChannelAdapter | undefined;

  beforeEach(async () => {
    telegram = await startFakeTelegram();
    tmp = tempDir();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await channel?.stop();
    channel = undefined;
    await telegram.close();
    tmp.remove();
  });

  it('with one send in three reset before the Bot API reads it, every message is answered, each exactly once', async () => {
    // Every third send is cut, but never the same reply more than twice, so that no reply's eight attempts can
    // all land on cut turns by the chance of timing (that would be a give-up, tested below).
    let sends = 0;
    const cutsOf = new Map<string, number>();
    telegram.resetConnection = (method, body) => {
      if (method !== 'sendMessage' || ++sends % 3 !== 0) return false;
      const cuts = cutsOf.get(String(body.text)) ?? 0;
      if (cuts === 2) return false;
      cutsOf.set(String(body.text), cuts + 1);
      return true;
    };
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig({}, { ...FAST_RETRIES, session: { dmScope: 'per-peer' } }) });
    const texts = Array.from({ length: 60 }, (_, i) => `message number ${i}`);
    for (const [i, text] of texts.entries()) telegram.pushUpdate(dm(text, { from: { id: 1000 + i, is_bot: false, first_name: `User ${i}` } }));
    const answered = (text: string) => telegram.callsOf('sendMessage').filter((c) => c.response.ok && String(c.body.text).includes(`You said: "${text}"`));
    await until(() => texts.every((t) => answered(t).length > 0), 'every message to be answered');
    // About one send in three was cut (fewer when a reply already cut twice came round again).
    expect(telegram.resets).toBeGreaterThanOrEqual(10);
    for (const text of texts) expect(answered(text), text).toHaveLength(1);
    expect(gw.gateway.deliveryFailures().byChannel).toEqual({});
  });

  it('a reply the Bot API never takes is given up after delivery.maxAttempts: logged with its ref, counted in /metrics and /status, not replayed', async () => {
    const log = capturingLogger('info');
    telegram.resetConnection = (method) => method === 'sendMessage';
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, logger: log.logger, config: telegramConfig({}, { delivery: { maxAttempts: 3, retryBaseMs: 1, retryMaxMs: 2 } }) });
    telegram.pushUpdate(dm('nobody will see this'));
    await until(() => Object.keys(gw!.gateway.deliveryFailures().byChannel).length > 0, 'the reply to be given up');
    expect(telegram.resets).toBe(3);
    expect(telegram.callsOf('sendMessage')).toHaveLength(0);

    const givenUp = log.lines.find((l) => l.msg === 'reply could not be delivered; given up');
    expect(givenUp).toBeDefined();
    expect(typeof givenUp!.correlationId).toBe('string');
    expect(log.lines.filter((l) => l.msg === 'Telegram did not take a delivery; trying again')).toHaveLength(2);

    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(/switchboard_replies_failed_total\{channel="telegram\/default"\} 1/);
    const status = (await (await fetch(`${gw.url}/status`)).json()) as { deliveries: { failed: Record<string, number>; recent: { chatId: string; correlationId: string }[] } };
    expect(status.deliveries.failed).toEqual({ 'telegram/default': 1 });
    expect(status.deliveries.recent).toEqual([expect.objectContaining({ chatId: '42', correlationId: givenUp!.correlationId })]);

    // Given up means done: a restart does not try the message again.
    telegram.resetConnection = undefined;
    await gw.stop();
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, config: telegramConfig({}, FAST_RETRIES) });
    telegram.pushUpdate(dm('after the restart'));
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('after the restart'));
    expect(telegram.callsOf('sendMessage').filter((c) => String(c.body.text).includes('nobody will see this'))).toHaveLength(0);
  });

  describe('the channel alone', () => {
    const sleeps: number[] = [];
    const start = async (maxAttempts = 8) => {
      sleeps.length = 0;
      const config = testConfig(tmp.dir, telegramConfig(), { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
      channel = createTelegramChannel({
        account: config.channels.telegram[0]!, clock: systemClock, logger: silentLogger(), stateDir: config.stateDir,
        delivery: { maxAttempts, baseDelayMs: 1, maxDelayMs: 2, sleep: async (ms) => { sleeps.push(ms); } },
      });
      await channel.start(async () => { throw new Error('no intake in this test'); });
      return channel;
    };
    const target = { channel: 'telegram' as const, accountId: 'default', chatId: '42', chatType: 'direct' as const };

    it('waits out a 429\'s retry_after, tries a 5xx again, and posts the reply once', async () => {
      const adapter = await start();
      telegram.failNext('sendMessage', { error_code: 429, description: 'Too Many Requests: retry after 7', parameters: { retry_after: 7 } });
      telegram.failNext('sendMessage', { error_code: 502, description: 'Bad Gateway' });
      await adapter.send(target, { text: 'hello through the storm' });
      const calls = telegram.callsOf('sendMessage');
      expect(calls.map((c) => c.response.ok)).toEqual([false, false, true]);
      expect(sleeps).toEqual([7000]);
    });

    it('does not retry what Telegram refused (403: blocked by the user), and throws it', async () => {
      const adapter = await start();
      telegram.failNext('sendMessage', { error_code: 403, description: 'Forbidden: bot was blocked by the user' });
      await expect(adapter.send(target, { text: 'unwanted' })).rejects.toThrow(/blocked/);
      expect(telegram.callsOf('sendMessage')).toHaveLength(1);
    });

    it('a part of a long reply that was reset is sent again alone: the parts before it are not repeated', async () => {
      const adapter = await start();
      let sends = 0;
      telegram.resetConnection = (method) => method === 'sendMessage' && ++sends === 2;
      const paragraphs = Array.from({ length: 3 }, (_, i) => `${String.fromCharCode(65 + i)}${'x'.repeat(3000)}`);
      await adapter.send(target, { text: paragraphs.join('\n\n') });
      const texts = telegram.callsOf('sendMessage').map((c) => String(c.body.text)[0]);
      expect(texts).toEqual(['A', 'B', 'C']);
      expect(telegram.resets).toBe(1);
    });
  });
});
