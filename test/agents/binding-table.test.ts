import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Binding } from '../../src/config/schema.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { startFakeDiscord, type FakeDiscord, type FakeUser } from '../fakes/fake-discord.ts';
import { userText, type RecordedRequest } from '../fakes/fake-openai.ts';
import { dmEvent, eventCallback, startFakeSlack, type FakeSlack } from '../fakes/fake-slack.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { dm } from '../channels/telegram/updates.ts';
import { BOT_TOKEN, postSlack, SIGNING_SECRET, until } from '../channels/slack/helpers.ts';
import { testConfig } from '../helpers/gateway.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

const b = (agentId: string, match: Record<string, unknown>) => ({ agentId, match }) as Binding;
const system = (r: RecordedRequest) => r.body.messages[0]!.content ?? '';

const GUILD = '4000000000000000001';
const GENERAL = '5000000000000000001';
const PROJECT = '5000000000000000002';
const alice: FakeUser = { id: '2000000000000000002', username: 'alice', global_name: 'Alice' };

describe('the binding table through Discord, Slack and Telegram (real SDKs against their fakes)', () => {
  const llm = useFakeOpenAI((r) => ({ content: `${/I am (\w+)/.exec(system(r))?.[1] ?? '?'} answers ${userText(r.body.messages.at(-1)!.content)}`, usage: null }));
  let discord: FakeDiscord;
  let slack: FakeSlack;
  let telegram: FakeTelegram;
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();

  beforeEach(async () => {
    discord = await startFakeDiscord({ bot: { id: '1000000000000000001', username: 'switchboard', bot: true }, guilds: [{ id: GUILD, channels: [{ id: GENERAL }, { id: PROJECT }] }] });
    slack = await startFakeSlack();
    telegram = await startFakeTelegram();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await discord.close();
    await slack.close();
    await telegram.close();
  });

  it('peer beats guild, team beats account, an account binding applies in another team, everything else goes to the first agent', async () => {
    const ids = ['main', 'guild', 'project', 'team', 'second'];
    const config = testConfig(tmp.dir, {
      providers: { default: { baseUrl: llm.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      agents: { list: ids.map((id) => ({ id, systemPrompt: `I am ${id}.` })), defaults: { tools: { preset: 'none' } } },
      bindings: [
        b('second', { channel: 'slack', accountId: 'second' }),
        b('team', { channel: 'slack', teamId: 't1' }),
        b('guild', { channel: 'discord', guildId: GUILD }),
        b('project', { channel: 'discord', peer: { kind: 'channel', id: PROJECT } }),
      ],
      channels: {
        discord: { dmPolicy: 'open', groupPolicy: 'open', requireMention: false },
        slack: { mode: 'http', dmPolicy: 'open', accounts: { second: { botToken: BOT_TOKEN } } },
        telegram: { dmPolicy: 'open' },
      },
      session: { dmScope: 'per-channel-peer', reset: { mode: 'off' } },
    }, {
      DISCORD_BOT_TOKEN: discord.token, DISCORD_API_BASE: discord.api,
      SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: slack.apiUrl,
      TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot,
    });
    gw = await startGateway({ config, logger: silentLogger() });
    await gw.supervisor.firstAttempts();
    await until(() => discord.connections > 0 && gw!.adapters.find((a) => a.id === 'discord')?.status === 'running', 'the Discord client');

    // Discord: the guild's general channel (guild binding), its project channel (peer binding), a DM (no guild: the first agent).
    discord.message({ channel_id: GENERAL, guild_id: GUILD, content: 'in general', author: alice });
    discord.message({ channel_id: PROJECT, guild_id: GUILD, content: 'in project', author: alice });
    discord.message({ channel_id: '3000000000000000003', channel_type: 1, content: 'in a discord dm', author: alice });
    // Slack: a DM in team T1 on the default account (team binding), on the second account (team beats account), and
    // on the second account in another team (only the account binding matches).
    await postSlack(gw, eventCallback(dmEvent('slack default T1', { user: 'U42', channel: 'D1' })));
    await postSlack(gw, eventCallback(dmEvent('slack second T1', { user: 'U42', channel: 'D2' })), { accountId: 'second' });
    await postSlack(gw, eventCallback({ ...dmEvent('slack second T9', { user: 'U42', channel: 'D3' }), team: 'T9' }, { teamId: 'T9' }), { accountId: 'second' });
    // Telegram: no binding at all.
    telegram.pushUpdate(dm('on telegram'));

    for (const channel of [GENERAL, PROJECT, '3000000000000000003']) await discord.waitForCall((c) => c.method === 'POST' && c.status === 200 && c.path === `/api/v10/channels/${channel}/messages`);
    for (const channel of ['D1', 'D2', 'D3']) await slack.waitFor('chat.postMessage', (c) => c.body.channel === channel);
    await telegram.waitFor('sendMessage', (c) => Number(c.body.chat_id) === 42);

    const discordText = (channel: string) => discord.posts(channel).map((c) => (c.body as { content?: string }).content);
    expect(discordText(GENERAL)).toEqual(['guild answers in general']);
    expect(discordText(PROJECT)).toEqual(['project answers in project']);
    expect(discordText('3000000000000000003')).toEqual(['main answers in a discord dm']);
    const slackText = (channel: string) => slack.callsOf('chat.postMessage').filter((c) => c.body.channel === channel).map((c) => c.body.text);
    expect(slackText('D1')).toEqual(['team answers slack default T1']);
    expect(slackText('D2')).toEqual(['team answers slack second T1']);
    expect(slackText('D3')).toEqual(['second answers slack second T9']);
    expect(telegram.calls.filter((c) => c.method === 'sendMessage').map((c) => c.body.text)).toEqual(['main answers on telegram']);

    // Each agent's own system prompt reached the model with its own messages.
    const prompts = Object.fromEntries(ids.map((id) => [id, llm.requests.filter((r) => system(r).includes(`I am ${id}.`)).map((r) => userText(r.body.messages.at(-1)!.content).split('\n').at(-1))]));
    expect(prompts).toEqual({
      main: expect.arrayContaining(['in a discord dm', 'on telegram']) as unknown,
      guild: ['in general'], project: ['in project'], team: expect.arrayContaining(['slack default T1', 'slack second T1']) as unknown, second: ['slack second T9'],
    });

    await until(async () => ((await (await fetch(`${gw!.url}/admin/sessions`)).json()) as { sessions: unknown[] }).sessions.length === 6, 'six sessions');
    const sessions = ((await (await fetch(`${gw.url}/admin/sessions`)).json()) as { sessions: { key: string; agentId: string }[] }).sessions;
    expect(sessions.map((s) => [s.key, s.agentId]).sort()).toEqual([
      ['agent:guild:discord:channel:5000000000000000001', 'guild'],
      ['agent:main:discord:direct:2000000000000000002', 'main'],
      ['agent:main:telegram:direct:42', 'main'],
      ['agent:project:discord:channel:5000000000000000002', 'project'],
      ['agent:second:slack:direct:u42', 'second'],
      // The same person on two Slack accounts of the same agent: one per-channel-peer key.
      ['agent:team:slack:direct:u42', 'team'],
    ].sort());
  });
});
