import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createDiscordChannel } from '../../../channels/discord/index.ts';
import type { DiscordAccountConfig } from '../../../src/config/resolved.ts';
import type { Submission } from '../../../src/core/channel-adapter.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { ChannelError } from '../../../src/core/errors.ts';
import { createLogger, silentLogger } from '../../../src/core/logger.ts';
import type { InboundMessage } from '../../../src/core/message.ts';
import { startFakeDiscord, type FakeDiscord, type FakeDiscordOptions } from '../../fakes/fake-discord.ts';
import { startTestGateway, tempDir } from '../../helpers/gateway.ts';

const accepted = (): Submission => ({ status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) });

function account(fake: FakeDiscord, overrides: Partial<DiscordAccountConfig> = {}): DiscordAccountConfig {
  return {
    accountId: 'default', enabled: true, token: fake.token, apiBase: fake.api, dmPolicy: 'open', allowFrom: [],
    groupPolicy: 'allowlist', groups: [], requireMention: true, ...overrides,
  };
}

/** Bounded wait for a condition that an event makes true. */
async function until(condition: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('discord adapter', () => {
  let fake: FakeDiscord | undefined;
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    stop = undefined;
    await fake?.close();
    fake = undefined;
  });

  async function startAdapter(fakeOptions: FakeDiscordOptions, extra: { startTimeoutMs?: number; token?: string; logLines?: string[] } = {}) {
    fake = await startFakeDiscord(fakeOptions);
    const lines = extra.logLines;
    const logger = lines
      ? createLogger({ level: 'debug', destination: new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } }), secrets: [fake.token] })
      : silentLogger();
    const adapter = createDiscordChannel({
      account: account(fake, extra.token ? { token: extra.token } : {}), clock: new ManualClock(), logger, stateDir: '/nonexistent', startTimeoutMs: extra.startTimeoutMs,
    });
    stop = () => adapter.stop();
    return adapter;
  }

  it('rejects a bad token with one actionable line that does not contain the token', async () => {
    const adapter = await startAdapter({}, { token: 'wrong-token-123456' });
    const error = await adapter.start(async () => accepted()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChannelError);
    expect((error as ChannelError).message).toMatch(/^Discord rejected DISCORD_BOT_TOKEN/);
    expect((error as ChannelError).message).not.toContain('wrong-token-123456');
    expect((error as ChannelError).message).not.toContain('\n');
    expect(adapter.status).toBe('failed');
  });

  it('explains how to enable the Message Content intent when Discord closes with 4014', async () => {
    const adapter = await startAdapter({ closeOnIdentify: 4014 });
    const error = (await adapter.start(async () => accepted()).catch((e: unknown) => e)) as ChannelError;
    expect(error.code).toBe('DISCORD_INTENTS_DISALLOWED');
    expect(error.message).toContain('enable "Message Content Intent" in the Developer Portal');
  });

  it('gives up after the start timeout instead of hanging', async () => {
    const adapter = await startAdapter({ silentOnIdentify: true }, { startTimeoutMs: 300 });
    const error = (await adapter.start(async () => accepted()).catch((e: unknown) => e)) as ChannelError;
    expect(error.code).toBe('DISCORD_START_TIMEOUT');
    expect(adapter.status).toBe('failed');
  });

  it('keeps heartbeating and handling messages after one event fails, logging its correlation id', async () => {
    const received: InboundMessage[] = [];
    let calls = 0;
    const lines: string[] = [];
    const adapter = await startAdapter({ heartbeatMs: 40 }, { logLines: lines });
    await adapter.start(async (message) => {
      calls++;
      if (calls === 1) throw new Error('boom in the sink');
      received.push(message);
      return accepted();
    });
    expect(adapter.status).toBe('running');
    fake!.message({ channel_id: '3000000000000000003', content: 'first, fails' });
    fake!.message({ channel_id: '3000000000000000003', content: 'second, fine' });
    await until(() => received.length === 1 && fake!.heartbeats >= 2);
    expect(received[0]!.text).toBe('second, fine');
    const failure = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => String(l.msg).includes('could not be handled'));
    expect(failure?.correlationId).toEqual(expect.any(String));
    expect(lines.join('')).not.toContain(fake!.token);
  });

  it('resumes after the gateway connection drops and keeps receiving', async () => {
    const received: InboundMessage[] = [];
    const adapter = await startAdapter({});
    await adapter.start(async (message) => { received.push(message); return accepted(); });
    fake!.dropConnection();
    await until(() => fake!.resumes === 1, 10_000);
    fake!.message({ channel_id: '3000000000000000003', content: 'after the drop' });
    await until(() => received.length === 1);
    expect(received[0]!.text).toBe('after the drop');
    expect(adapter.status).toBe('running');
    expect(adapter.statusDetail).toBeUndefined();
  });

  it('ignores its own messages and other bots', async () => {
    const received: InboundMessage[] = [];
    const adapter = await startAdapter({});
    await adapter.start(async (message) => { received.push(message); return accepted(); });
    fake!.message({ channel_id: '3000000000000000003', content: 'me', author: fake!.bot });
    fake!.message({ channel_id: '3000000000000000003', content: 'other bot', author: { id: '2000000000000000077', username: 'otherbot', bot: true } });
    fake!.message({ channel_id: '3000000000000000003', content: 'a person' });
    await until(() => received.length === 1);
    expect(received.map((m) => m.text)).toEqual(['a person']);
  });
});

describe('discord failing to start inside the gateway', () => {
  it('leaves the other channels running', async () => {
    const fake = await startFakeDiscord();
    const tmp = tempDir();
    const gw = await startTestGateway({ dir: tmp.dir, env: { DISCORD_BOT_TOKEN: 'not-the-right-token', DISCORD_API_BASE: fake.api } });
    try {
      const discord = gw.adapters.find((a) => a.id === 'discord');
      expect(discord?.status).toBe('failed');
      expect(discord?.statusDetail).toMatch(/^Discord rejected DISCORD_BOT_TOKEN/);
      const response = await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'u', text: 'still there?' }) });
      expect(response.status).toBe(200);
    } finally {
      await gw.stop();
      await fake.close();
      tmp.remove();
    }
  });
});
