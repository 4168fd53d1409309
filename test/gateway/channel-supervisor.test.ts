import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChannelStatus } from '../../src/core/channel-adapter.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { ChannelError, StoreError } from '../../src/core/errors.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { ChannelSupervisor } from '../../src/gateway/channel-supervisor.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { startSwitchableProxy, type SwitchableProxy } from '../fakes/switchable-proxy.ts';
import { testConfig } from '../helpers/gateway.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { capturingLogger } from '../helpers/log-capture.ts';
import { useTempDir } from '../helpers/fixtures.ts';

/** An adapter whose start fails with the scripted errors, in order, then succeeds. */
function scriptedAdapter(failures: unknown[]) {
  let status: ChannelStatus = 'stopped';
  const adapter = {
    id: 'telegram' as const, accountId: 'default', starts: 0, stops: 0,
    get status() { return status; },
    set status(s: ChannelStatus) { status = s; },
    statusDetail: undefined as string | undefined,
    async start() {
      adapter.starts++;
      const failure = failures.shift();
      if (failure) { status = 'failed'; throw failure; }
      status = 'running';
    },
    async stop() { adapter.stops++; if (status !== 'failed') status = 'stopped'; },
    async send() {},
  };
  return adapter;
}

const tick = () => new Promise((resolve) => setImmediate(resolve));
const unreachable = () => new ChannelError('TELEGRAM_UNREACHABLE', 'Could not reach the Telegram Bot API (ECONNREFUSED)');

describe('ChannelSupervisor', () => {
  it('retries a failing start with capped exponential backoff and says it once, then connects', async () => {
    const timers = new ManualTimers();
    const adapter = scriptedAdapter([unreachable(), unreachable(), unreachable()]);
    const { logger, lines } = capturingLogger();
    const supervisor = new ChannelSupervisor({ adapters: [adapter], sink: async () => { throw new Error('unused'); }, logger, clock: new ManualClock(0), timers, random: () => 0.5, backoff: { baseMs: 1000, maxMs: 3000 }, watchMs: 60_000 });
    supervisor.start();
    await supervisor.firstAttempts();
    expect(supervisor.health()[0]).toMatchObject({ state: 'retrying', attempts: 1, lastError: expect.stringContaining('ECONNREFUSED'), nextRetryAt: new Date(1000).toISOString() });
    expect(timers.delays()).toEqual([1000, 60_000]);
    timers.advance(1000);
    await tick();
    expect(timers.delays()).toEqual([2000, 59_000]);
    timers.advance(2000);
    await tick();
    expect(timers.delays()).toEqual([3000, 57_000]); // capped at maxMs
    timers.advance(3000);
    await tick();
    expect(adapter.starts).toBe(4);
    expect(supervisor.health()[0]).toMatchObject({ state: 'connected', attempts: 4 });
    expect(timers.delays()).toEqual([54_000]); // only the watch
    const warnings = lines.filter((l) => l.level === 40).map((l) => l.msg);
    expect(warnings).toEqual(['channel telegram/default did not start: Could not reach the Telegram Bot API (ECONNREFUSED) (retrying in 1 s)']);
    expect(lines.filter((l) => l.level === 20 && l.msg.includes('did not start'))).toHaveLength(2);
    expect(lines.at(-1)?.msg).toBe('channel telegram/default connected after 4 attempts');
    await supervisor.stop();
  });

  it('spreads delays with jitter, never above the cap', async () => {
    const timers = new ManualTimers();
    const failures = Array.from({ length: 30 }, unreachable);
    const adapter = scriptedAdapter(failures);
    let r = 0;
    const supervisor = new ChannelSupervisor({ adapters: [adapter], sink: async () => { throw new Error('unused'); }, logger: silentLogger(), clock: new ManualClock(0), timers, random: () => [0, 1][r++ % 2]!, backoff: { baseMs: 1000, maxMs: 300_000, jitter: 0.2 }, watchMs: 10_000_000 });
    supervisor.start();
    await supervisor.firstAttempts();
    const seen: number[] = [];
    for (let i = 0; i < 12; i++) {
      const delay = timers.delays()[0]!;
      seen.push(delay);
      timers.advance(delay);
      await tick();
    }
    expect(seen.slice(0, 4)).toEqual([800, 2400, 3200, 9600]);
    expect(Math.max(...seen)).toBe(300_000);
    await supervisor.stop();
  });

  it('gives up at once on a refused token, with one line', async () => {
    const timers = new ManualTimers();
    const adapter = scriptedAdapter([new ChannelError('TELEGRAM_TOKEN_REJECTED', 'Telegram rejected TELEGRAM_BOT_TOKEN (401): create a bot with @BotFather')]);
    const { logger, lines } = capturingLogger();
    const supervisor = new ChannelSupervisor({ adapters: [adapter], sink: async () => { throw new Error('unused'); }, logger, clock: new ManualClock(0), timers, watchMs: 5000 });
    supervisor.start();
    await supervisor.firstAttempts();
    timers.advance(3_600_000);
    await tick();
    expect(adapter.starts).toBe(1);
    expect(supervisor.health()[0]).toMatchObject({ state: 'gave-up', attempts: 1 });
    expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual(['channel telegram/default did not start: Telegram rejected TELEGRAM_BOT_TOKEN (401): create a bot with @BotFather']);
    await supervisor.stop();
  });

  it('gives up on a channel that fails after it connected because its token was revoked (the adapter\'s code is kept)', async () => {
    const timers = new ManualTimers();
    const adapter = Object.assign(scriptedAdapter([]), { lastFailure: undefined as Error | undefined });
    const { logger, lines } = capturingLogger();
    const supervisor = new ChannelSupervisor({ adapters: [adapter], sink: async () => { throw new Error('unused'); }, logger, clock: new ManualClock(0), timers, random: () => 0.5, watchMs: 5000 });
    supervisor.start();
    await supervisor.firstAttempts();
    adapter.status = 'failed';
    adapter.statusDetail = 'Slack account "default": Socket Mode did not connect (token_revoked); check SLACK_APP_TOKEN';
    adapter.lastFailure = new ChannelError('SLACK_AUTH_FAILED', adapter.statusDetail);
    timers.advance(5000);
    await tick();
    for (let i = 0; i < 5; i++) timers.advance(600_000);
    await tick();
    expect(adapter.starts).toBe(1);
    expect(supervisor.health()[0]).toMatchObject({ state: 'gave-up', lastErrorCode: 'SLACK_AUTH_FAILED' });
    expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual(['channel telegram/default stopped: Slack account "default": Socket Mode did not connect (token_revoked); check SLACK_APP_TOKEN']);
    await supervisor.stop();
  });

  it('restarts a channel that fails after it connected', async () => {
    const timers = new ManualTimers();
    const adapter = scriptedAdapter([]);
    const supervisor = new ChannelSupervisor({ adapters: [adapter], sink: async () => { throw new Error('unused'); }, logger: silentLogger(), clock: new ManualClock(0), timers, random: () => 0.5, watchMs: 5000 });
    supervisor.start();
    await supervisor.firstAttempts();
    adapter.status = 'failed';
    adapter.statusDetail = 'Telegram polling stopped: network down';
    timers.advance(5000);
    await tick();
    expect(adapter.stops).toBe(1);
    expect(supervisor.health()[0]).toMatchObject({ state: 'retrying', lastError: 'Telegram polling stopped: network down' });
    timers.advance(1000);
    await tick();
    expect(adapter.starts).toBe(2);
    expect(supervisor.health()[0]).toMatchObject({ state: 'connected' });
    await supervisor.stop();
    expect(supervisor.health()[0]?.state).toBe('stopped');
  });
});

describe('a channel whose platform is down at start', () => {
  const tmp = useTempDir();
  let telegram: FakeTelegram;
  let proxy: SwitchableProxy;
  let gw: RunningGateway | undefined;
  beforeEach(async () => {
    telegram = await startFakeTelegram();
    proxy = await startSwitchableProxy(Number(new URL(telegram.apiRoot).port), false);
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await proxy.close();
    await telegram.close();
  });

  const readyz = async () => {
    const response = await fetch(`${gw!.url}/readyz`);
    return { status: response.status, body: await response.json() as { ready: boolean; failing?: { name: string; state?: string; error: string }[] } };
  };

  it('does not hold up start-up, comes up by itself once the API answers, and /readyz goes 503 → 200', async () => {
    const timers = new ManualTimers();
    const config = testConfig(tmp.dir, { channels: { telegram: { dmPolicy: 'open' } } }, { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: proxy.url });
    gw = await startGateway({ config, logger: silentLogger(), supervision: { timers, random: () => 0.5, watchMs: 600_000 } });
    await gw.supervisor.firstAttempts();
    const down = await readyz();
    expect(down.status).toBe(503);
    expect(down.body.failing).toEqual([expect.objectContaining({ name: 'telegram/default', state: 'retrying', error: expect.stringMatching(/^Could not reach the Telegram Bot API at http:\/\/127\.0\.0\.1:\d+ \(ECONNRESET\)/) })]);
    expect(telegram.callsOf('getMe')).toHaveLength(0);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);

    proxy.up = true;
    timers.advance(1000);
    await expect.poll(() => gw!.supervisor.health()[1]?.state).toBe('connected');
    expect(await readyz()).toEqual({ status: 200, body: { ready: true } });
    telegram.pushUpdate({ message: { message_id: 1, date: 1, chat: { id: 42, type: 'private' }, from: { id: 42, is_bot: false, first_name: 'Alice' }, text: 'back?' } });
    await telegram.waitFor('sendMessage');
    const status = await (await fetch(`${gw.url}/status`)).json() as { channels: { id: string; supervision?: { attempts: number } }[] };
    expect(status.channels.find((c) => c.id === 'telegram')?.supervision?.attempts).toBe(2);
  });

  it('stops retrying on a 401 and stays not ready', async () => {
    proxy.up = true;
    const timers = new ManualTimers();
    const config = testConfig(tmp.dir, {}, { TELEGRAM_BOT_TOKEN: '123:wrong-token', TELEGRAM_API_ROOT: proxy.url });
    gw = await startGateway({ config, logger: silentLogger(), supervision: { timers, watchMs: 5000 } });
    await gw.supervisor.firstAttempts();
    for (let i = 0; i < 5; i++) timers.advance(600_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(telegram.callsOf('getMe')).toHaveLength(1);
    const { status, body } = await readyz();
    expect(status).toBe(503);
    expect(body.failing).toEqual([expect.objectContaining({ name: 'telegram/default', state: 'gave-up', error: expect.stringContaining('Telegram rejected TELEGRAM_BOT_TOKEN (401)') })]);
  });

  it('/readyz names the store while it cannot be read', async () => {
    gw = await startGateway({ config: testConfig(tmp.dir), logger: silentLogger() });
    expect((await readyz()).status).toBe(200);
    const get = gw.store.get.bind(gw.store);
    gw.store.get = async () => { throw new StoreError('Reading session failed: SQLITE_IOERR'); };
    expect(await readyz()).toEqual({ status: 503, body: { ready: false, failing: [{ part: 'store', name: 'store', error: 'Reading session failed: SQLITE_IOERR' }] } });
    gw.store.get = get;
    expect((await readyz()).status).toBe(200);
  });
});
