import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramChannel } from '../../../channels/telegram/index.ts';
import { createWebchatChannel } from '../../../channels/webchat/index.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { startGateway, type RunningGateway } from '../../../src/main.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { startSwitchableProxy, type SwitchableProxy } from '../../fakes/switchable-proxy.ts';
import { tempDir, testConfig } from '../../helpers/gateway.ts';
import { ManualTimers } from '../../helpers/manual-timers.ts';
import { capturingLogger } from '../../helpers/log-capture.ts';

type Ready = { status: number; body: { ready: boolean; failing?: { name: string; status?: string; state?: string; error: string }[] } };

describe('Telegram: an outage after the channel connected', () => {
  let tmp: ReturnType<typeof tempDir>;
  let telegram: FakeTelegram;
  let proxy: SwitchableProxy;
  let gw: RunningGateway | undefined;
  beforeEach(async () => {
    tmp = tempDir();
    telegram = await startFakeTelegram({ maxPollMs: 200 });
    proxy = await startSwitchableProxy(Number(new URL(telegram.apiRoot).port), true);
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await proxy.close();
    await telegram.close();
    tmp.remove();
  });

  /**
   * Starts the gateway with a captured log, manual supervision timers and manual timers of the channel's pauses
   * between getUpdates attempts (`polls`), once Telegram has been polled.
   */
  const startPolling = async (overrides: Record<string, unknown> = {}) => {
    const { logger, lines } = capturingLogger();
    const timers = new ManualTimers();
    const polls = new ManualTimers();
    const config = testConfig(tmp.dir, overrides, { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: proxy.url });
    // The configured channels, as the gateway makes them, but for the Telegram channel's timers.
    const adapters = [
      createWebchatChannel({ clock: systemClock }),
      createTelegramChannel({ account: config.channels.telegram[0]!, clock: systemClock, logger, stateDir: config.stateDir, timers: polls }),
    ];
    const running = await startGateway({ config, logger, adapters, supervision: { timers, watchMs: 5000 } });
    gw = running;
    await running.supervisor.firstAttempts();
    await telegram.waitFor('getUpdates');
    return { lines, timers, polls, running };
  };

  /** Ends the channel's pause before its next getUpdates attempt (3 s after a network error or a first 5xx). */
  const retryNow = async (polls: ManualTimers) => {
    await expect.poll(() => polls.delays()).toEqual([3000]);
    polls.advance(3000);
  };

  const readyz = async (): Promise<Ready> => {
    const response = await fetch(`${gw!.url}/readyz`);
    return { status: response.status, body: await response.json() as Ready['body'] };
  };

  it('is not ready while getUpdates fails (one warning), and ready again once Telegram answers', { timeout: 20_000 }, async () => {
    const { lines, polls, running: gw } = await startPolling({ session: { dmScope: 'per-peer' }, channels: { telegram: { dmPolicy: 'open' } } });
    expect(await readyz()).toEqual({ status: 200, body: { ready: true } });

    proxy.up = false;
    proxy.dropConnections();
    await expect.poll(async () => (await readyz()).status, { timeout: 5000 }).toBe(503);
    const down = await readyz();
    expect(down.body.failing).toEqual([expect.objectContaining({
      name: 'telegram/default', status: 'starting', state: 'connected',
      error: expect.stringMatching(/^Could not reach the Telegram Bot API at http:\/\/127\.0\.0\.1:\d+ \(ECONN(RESET|REFUSED)\)/),
    })]);
    // The channel tries again after its pause; a second failed attempt is not a second warning.
    await retryNow(polls);
    await expect.poll(() => lines.some((l) => l.level === 20 && l.msg.startsWith('Telegram polling: getUpdates failed again')), { timeout: 5000 }).toBe(true);
    expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual([
      expect.stringMatching(/^Telegram polling: getUpdates failed: Could not reach the Telegram Bot API/),
    ]);

    proxy.up = true;
    await retryNow(polls);
    await expect.poll(async () => (await readyz()).status, { timeout: 8000 }).toBe(200);
    expect(lines.filter((l) => l.level === 30 && l.msg === 'Telegram polling reconnected')).toHaveLength(1);
    expect(gw.supervisor.health()[1]).toMatchObject({ state: 'connected', attempts: 1 });
    telegram.pushUpdate({ message: { message_id: 1, date: 1, chat: { id: 42, type: 'private' }, from: { id: 42, is_bot: false, first_name: 'Alice' }, text: 'back?' } });
    await telegram.waitFor('sendMessage');
  });

  it('is not ready while getUpdates answers 5xx, and ready again on the retry that succeeds', { timeout: 20_000 }, async () => {
    const { lines, polls } = await startPolling();
    telegram.failNext('getUpdates', { error_code: 502, description: 'Bad Gateway' });
    await expect.poll(async () => (await readyz()).status, { timeout: 5000 }).toBe(503);
    expect((await readyz()).body.failing).toEqual([expect.objectContaining({
      name: 'telegram/default', status: 'starting', error: `The Telegram Bot API at ${proxy.url} answered 502 (Bad Gateway) to getUpdates.`,
    })]);
    // The retry comes after the channel's pause (3 s, auto-retry's first).
    await retryNow(polls);
    await expect.poll(async () => (await readyz()).status, { timeout: 8000 }).toBe(200);
    expect(lines.filter((l) => l.msg.startsWith('Telegram polling')).map((l) => [l.level, l.msg])).toEqual([
      [40, `Telegram polling: getUpdates failed: The Telegram Bot API at ${proxy.url} answered 502 (Bad Gateway) to getUpdates. (grammy retries; the channel is not connected until it answers)`],
      [30, 'Telegram polling reconnected'],
    ]);
  });

  it('gives up with one error line when getUpdates answers 401 (token revoked mid-run)', { timeout: 20_000 }, async () => {
    const { lines, timers, running: gw } = await startPolling();
    telegram.failNext('getUpdates', { error_code: 401, description: 'Unauthorized' });
    await telegram.waitFor('getUpdates', (c) => c.response.error_code === 401);
    await expect.poll(() => gw.adapters.find((a) => a.id === 'telegram')?.status).toBe('failed');
    timers.advance(5000);
    await expect.poll(() => gw.supervisor.health()[1]?.state).toBe('gave-up');
    for (let i = 0; i < 5; i++) timers.advance(600_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(telegram.callsOf('getMe')).toHaveLength(1);
    expect(gw.supervisor.health()[1]).toMatchObject({ state: 'gave-up', attempts: 1, lastErrorCode: 'TELEGRAM_TOKEN_REJECTED' });
    const ready = await readyz();
    expect(ready.status).toBe(503);
    expect(ready.body.failing).toEqual([expect.objectContaining({ name: 'telegram/default', state: 'gave-up', error: 'Telegram rejected TELEGRAM_BOT_TOKEN (401): create a bot with @BotFather and put its token in .env' })]);
    expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual([
      'channel telegram/default stopped: Telegram rejected TELEGRAM_BOT_TOKEN (401): create a bot with @BotFather and put its token in .env',
    ]);
  });

  it('gives up when getUpdates answers 404 (grammy would retry it forever)', { timeout: 20_000 }, async () => {
    const { lines, timers, running: gw } = await startPolling();
    telegram.failNext('getUpdates', { error_code: 404, description: 'Not Found' });
    await expect.poll(() => gw.adapters.find((a) => a.id === 'telegram')?.status).toBe('failed');
    timers.advance(5000);
    await expect.poll(() => gw.supervisor.health()[1]?.state).toBe('gave-up');
    const polls = telegram.callsOf('getUpdates').length;
    for (let i = 0; i < 5; i++) timers.advance(600_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(gw.supervisor.health()[1]).toMatchObject({ state: 'gave-up', attempts: 1, lastErrorCode: 'TELEGRAM_TOKEN_REJECTED' });
    expect(telegram.callsOf('getUpdates').length).toBeLessThanOrEqual(polls + 1);
    expect(lines.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([
      'channel telegram/default stopped: Telegram rejected TELEGRAM_BOT_TOKEN (404): create a bot with @BotFather and put its token in .env',
    ]);
  });
});
