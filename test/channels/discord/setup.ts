import { startFakeDiscord, type DiscordRestCall, type FakeDiscord, type FakeUser } from '../../fakes/fake-discord.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { startTestGateway, tempDir } from '../../helpers/gateway.ts';
import type { RunningGateway } from '../../../src/main.ts';

/** Ids of the fake Discord world the tests use. */
export const ids = {
  guild: '4000000000000000001',
  channel: '5000000000000000001',
  thread: '6000000000000000001',
  botRole: '7000000000000000001',
  otherGuild: '4000000000000000002',
  otherChannel: '5000000000000000002',
  dm: '3000000000000000003',
  bot: '1000000000000000001',
};

export const alice: FakeUser = { id: '2000000000000000002', username: 'alice', global_name: 'Alice' };

/** Discord (fake) + OpenAI (fake) + the whole gateway with the Discord channel on. */
export interface DiscordWorld {
  discord: FakeDiscord;
  openai: FakeOpenAI;
  gw: RunningGateway;
  /** Resolves with the first 200 `POST /channels/:id/messages` matching. */
  reply(channelId: string, match?: (call: DiscordRestCall) => boolean): Promise<DiscordRestCall>;
  close(): Promise<void>;
}

/** Starts the world; `config` is merged over a Discord config with open DMs and the test guild allowed. */
export async function startDiscordWorld(config: Record<string, unknown> = {}): Promise<DiscordWorld> {
  const discord = await startFakeDiscord({
    bot: { id: ids.bot, username: 'switchboard', bot: true },
    guilds: [
      { id: ids.guild, channels: [{ id: ids.channel }], threads: [{ id: ids.thread, parent_id: ids.channel }], botRoleId: ids.botRole },
      { id: ids.otherGuild, channels: [{ id: ids.otherChannel }] },
    ],
  });
  const openai = await startFakeOpenAI();
  const tmp = tempDir('switchboard-discord-');
  const base = { providers: { default: { maxRetries: 0 } }, channels: { discord: { dmPolicy: 'open', guilds: [ids.guild] } } };
  let gw: RunningGateway;
  try {
    gw = await startTestGateway({
      dir: tmp.dir,
      env: { DISCORD_BOT_TOKEN: discord.token, DISCORD_API_BASE: discord.api, OPENAI_BASE_URL: openai.baseURL, OPENAI_API_KEY: 'sk-test', OPENAI_MODEL: 'gpt-test' },
      config: merge(base, config),
    });
  } catch (error) {
    await discord.close();
    await openai.close();
    tmp.remove();
    throw error;
  }
  return {
    discord, openai, gw,
    reply: (channelId, match = () => true) => discord.waitForCall((c) => c.method === 'POST' && c.status === 200
      && c.path === `/api/v10/channels/${channelId}/messages` && match(c)),
    close: async () => {
      await gw.stop();
      await discord.close();
      await openai.close();
      tmp.remove();
    },
  };
}

/** The keys `GET /admin/sessions` lists, with their parent keys. */
export async function listedSessions(gw: RunningGateway): Promise<{ key: string; parentKey?: string; channel: string }[]> {
  const response = await fetch(`${gw.url}/admin/sessions`);
  const body = (await response.json()) as { sessions: { key: string; parentKey?: string; channel: string }[] };
  return body.sessions;
}

function merge(target: Record<string, unknown>, source: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...target };
  for (const [k, v] of Object.entries(source)) {
    const t = out[k];
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && t && typeof t === 'object' && !Array.isArray(t)
      ? merge(t as Record<string, unknown>, v as Record<string, unknown>)
      : v;
  }
  return out;
}
