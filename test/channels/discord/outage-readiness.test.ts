import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway } from '../../../src/main.ts';
import { startFakeDiscord } from '../../fakes/fake-discord.ts';
import { tempDir, testConfig } from '../../helpers/gateway.ts';
import { ManualTimers } from '../../helpers/manual-timers.ts';
import { alice, ids, startDiscordWorld, type DiscordWorld } from './setup.ts';
import { capturingLogger } from '../../helpers/log-capture.ts';

type Ready = { status: number; body: { ready: boolean; failing?: { name: string; status?: string; state?: string; error: string }[] } };

describe('Discord: the gateway connection drops after the channel connected', () => {
  let world: DiscordWorld;
  beforeAll(async () => { world = await startDiscordWorld({ session: { dmScope: 'per-peer' } }); });
  afterAll(async () => { await world?.close(); });

  const readyz = async (): Promise<Ready> => {
    const response = await fetch(`${world.gw.url}/readyz`);
    return { status: response.status, body: await response.json() as Ready['body'] };
  };

  it('is not ready while discord.js reconnects, and ready again once the gateway is back', { timeout: 20_000 }, async () => {
    const { discord, gw } = world;
    const adapter = gw.adapters.find((a) => a.id === 'discord')!;
    expect(await readyz()).toEqual({ status: 200, body: { ready: true } });

    // The gateway goes down: the connection is cut and every new one is refused.
    discord.refuseGateway = true;
    discord.dropConnection();
    await expect.poll(async () => (await readyz()).status, { timeout: 5000 }).toBe(503);
    expect((await readyz()).body.failing).toEqual([expect.objectContaining({
      name: 'discord/default', status: 'starting', state: 'connected', error: 'reconnecting to the Discord gateway',
    })]);
    expect(adapter.status).toBe('starting');

    discord.refuseGateway = false;
    await expect.poll(async () => (await readyz()).status, { timeout: 10_000 }).toBe(200);
    expect(adapter.status).toBe('running');
    expect(gw.supervisor.health().find((h) => h.id === 'discord')).toMatchObject({ state: 'connected', attempts: 1 });
    discord.message({ channel_id: ids.dm, content: 'back?', author: alice });
    await world.reply(ids.dm, (c) => c.body?.content === 'echo: back?');
  });
});

describe('Discord: the gateway closes for good (4004, the token was reset mid-run)', () => {
  it('fails with DISCORD_TOKEN_REJECTED and the supervisor gives up without another attempt', { timeout: 20_000 }, async () => {
    const discord = await startFakeDiscord({ bot: { id: ids.bot, username: 'switchboard', bot: true } });
    const tmp = tempDir('switchboard-discord-');
    const { logger, lines } = capturingLogger();
    const timers = new ManualTimers();
    const config = testConfig(tmp.dir, { channels: { discord: { dmPolicy: 'open' } } }, { DISCORD_BOT_TOKEN: discord.token, DISCORD_API_BASE: discord.api });
    const gw = await startGateway({ config, logger, supervision: { timers, watchMs: 5000 } });
    try {
      await gw.supervisor.firstAttempts();
      const adapter = gw.adapters.find((a) => a.id === 'discord')!;
      expect(adapter.status).toBe('running');
      const identifies = discord.identifies;
      discord.closeConnection(4004);
      await expect.poll(() => adapter.status, { timeout: 5000 }).toBe('failed');
      expect(adapter.lastFailure).toMatchObject({ code: 'DISCORD_TOKEN_REJECTED' });
      timers.advance(5000);
      await expect.poll(() => gw.supervisor.health().find((h) => h.id === 'discord')?.state).toBe('gave-up');
      for (let i = 0; i < 5; i++) timers.advance(600_000);
      await new Promise((resolve) => setImmediate(resolve));
      expect(gw.supervisor.health().find((h) => h.id === 'discord')).toMatchObject({ state: 'gave-up', attempts: 1, lastErrorCode: 'DISCORD_TOKEN_REJECTED' });
      expect(discord.identifies).toBe(identifies);
      const response = await fetch(`${gw.url}/readyz`);
      expect(response.status).toBe(503);
      expect(lines.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([
        'channel discord/default stopped: Discord rejected DISCORD_BOT_TOKEN (or channels.discord.token): the bot token is wrong or was reset. Copy it again from the Developer Portal (your application → Bot → Reset Token).',
      ]);
    } finally {
      await gw.stop();
      await discord.close();
      tmp.remove();
    }
  });
});
