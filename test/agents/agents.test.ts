import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Binding } from '../../src/config/schema.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { applyRekey, planRekey } from '../../src/gateway/rekey.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { agentOf, type BindingFacts } from '../../src/routing/bindings.ts';
import { AgentTranscriptStores } from '../../src/sessions/agent-transcripts.ts';
import { allSessions } from '../../src/sessions/scan.ts';
import { KeyvSessionStore } from '../../src/sessions/store.ts';
import type { TranscriptMessage } from '../../src/sessions/transcript.ts';
import { userText, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { sentTo } from '../channels/telegram/harness.ts';
import { BOB, dm, groupMessage } from '../channels/telegram/updates.ts';
import { testConfig, tempDir } from '../helpers/gateway.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

const b = (agentId: string, match: Record<string, unknown>) => ({ agentId, match }) as Binding;
const system = (r: RecordedRequest) => r.body.messages[0]!.content ?? '';

describe('bindings', () => {
  const bindings: Binding[] = [
    b('ch', { channel: 'discord' }),
    b('acct', { channel: 'discord', accountId: 'work' }),
    b('guild', { channel: 'discord', guildId: 'G1' }),
    b('peer', { channel: 'discord', peer: { kind: 'channel', id: 'C9' } }),
    b('dm', { channel: 'discord', peer: { kind: 'direct', id: 'U1' } }),
    b('team', { channel: 'slack', teamId: 'T1' }),
  ];
  const facts = (f: Partial<BindingFacts>): BindingFacts => ({ channel: 'discord', accountId: 'default', chatType: 'channel', ...f });

  it('the most specific match wins: peer, then guild/team, then account, then channel, else the first agent', () => {
    const table: [Partial<BindingFacts>, string][] = [
      [{ groupId: 'C1' }, 'ch'],
      [{ groupId: 'C1', accountId: 'work' }, 'acct'],
      [{ groupId: 'C1', accountId: 'work', containerIds: ['G1'] }, 'guild'],
      [{ groupId: 'C9', accountId: 'work', containerIds: ['G1'] }, 'peer'],
      [{ groupId: 'c9' }, 'peer'],
      [{ chatType: 'direct', peerId: 'U1', accountId: 'work' }, 'dm'],
      [{ chatType: 'direct', peerId: 'U2', accountId: 'work' }, 'acct'],
      [{ chatType: 'group', groupId: 'C9', channel: 'telegram' }, 'main'],
      [{ channel: 'slack', containerIds: ['T1'] }, 'team'],
      [{ channel: 'slack', containerIds: ['T2'] }, 'main'],
    ];
    for (const [f, agent] of table) expect([f, agentOf(bindings, facts(f), 'main')]).toEqual([f, agent]);
    // Among equally specific matches the first listed wins.
    expect(agentOf([b('a', { channel: 'slack' }), b('b', { channel: 'slack' })], facts({ channel: 'slack' }), 'main')).toBe('a');
  });

  it('a binding to an unknown agent, a duplicate match or an impossible match stops start-up naming the entry', () => {
    const dir = tempDir();
    try {
      const load = (list: unknown[]) => () => testConfig(dir.dir, { agents: { list: [{ id: 'main' }, { id: 'work' }] }, bindings: list });
      expect(load([b('nope', { channel: 'telegram' })])).toThrow(/bindings\[0\]\.agentId: no agent "nope"/);
      expect(load([b('work', { channel: 'slack' }), b('main', { channel: 'slack' })])).toThrow(/bindings\[1\]\.match: the same match as bindings\[0\]/);
      expect(load([b('work', { channel: 'telegram', guildId: '1' })])).toThrow(/bindings\[0\]\.match\.guildId: only Discord/);
      expect(load([b('work', { channel: 'discord', teamId: 'T' })])).toThrow(/bindings\[0\]\.match\.teamId: only Slack/);
      expect(load([b('work', { channel: 'telegram', peer: { kind: 'channel', id: '1' } })])).toThrow(/peer\.kind: telegram has no channel chats/);
      expect(load([b('work', { channel: 'telegram', accountId: 'other' })])).toThrow(/match\.accountId: telegram has no account "other"/);
      expect(load([b('work', { channel: 'telegram' }), b('main', { channel: 'telegram', peer: { kind: 'group', id: -5 } })])).not.toThrow();
    } finally {
      dir.remove();
    }
  });
});

describe('several agents', () => {
  const fake = useFakeOpenAI((r) => ({ content: `${/I am (\w+)/.exec(system(r))?.[1] ?? '?'} answers ${userText(r.body.messages.at(-1)!.content)}`, usage: null }));
  let telegram: FakeTelegram | undefined;
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();

  beforeEach(async () => {
    for (const id of ['home', 'work']) {
      mkdirSync(path.join(tmp.dir, `ws-${id}`), { recursive: true });
      writeFileSync(path.join(tmp.dir, `ws-${id}`, 'AGENTS.md'), `Rules of the ${id} agent.`);
    }
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await telegram?.close();
    telegram = undefined;
  });

  const agents = () => ({
    list: [
      { id: 'home', systemPrompt: 'I am home.', workspace: path.join(tmp.dir, 'ws-home') },
      { id: 'work', systemPrompt: 'I am work.', workspace: path.join(tmp.dir, 'ws-work') },
    ],
    defaults: { tools: { preset: 'none' } },
  });
  const start = async (config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => {
    gw = await startGateway({
      config: testConfig(tmp.dir, { providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } }, agents: agents(), ...config }, env),
      logger: silentLogger(),
    });
    return gw;
  };
  const keys = async () => ((await (await fetch(`${gw!.url}/admin/sessions`)).json()) as { sessions: { key: string; agentId: string }[] }).sessions.map((s) => s.key).sort();

  it('one person in two bound places gets two agents (own prompt, workspace, folder) and two keys', async () => {
    telegram = await startFakeTelegram();
    await start({
      bindings: [b('work', { channel: 'telegram', peer: { kind: 'group', id: -700 } })],
      channels: { telegram: { dmPolicy: 'open', groupPolicy: 'open', requireMention: false } },
      session: { dmScope: 'per-channel-peer', reset: { mode: 'off' } },
    }, { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    telegram.pushUpdate(dm('hello from my phone'));
    await telegram.waitFor('sendMessage', (c) => Number(c.body.chat_id) === 42);
    telegram.pushUpdate(groupMessage(-700, 'hello team'));
    await telegram.waitFor('sendMessage', (c) => Number(c.body.chat_id) === -700);
    expect(sentTo(telegram, 42).map((c) => c.body.text)).toEqual(['home answers hello from my phone']);
    expect(sentTo(telegram, -700).map((c) => c.body.text)).toEqual(['work answers hello team']);
    const [dmRequest, groupRequest] = fake.requests;
    expect(system(dmRequest!)).toContain('Rules of the home agent.');
    expect(system(groupRequest!)).toContain('Rules of the work agent.');
    expect(system(groupRequest!)).not.toContain('home');
    expect(await keys()).toEqual(['agent:home:telegram:direct:42', 'agent:work:telegram:group:-700']);
    const only = ((await (await fetch(`${gw!.url}/admin/sessions?agent=work`)).json()) as { sessions: { key: string }[] }).sessions.map((s) => s.key);
    expect(only).toEqual(['agent:work:telegram:group:-700']);
    for (const [agent, key] of [['home', 'agent:home:telegram:direct:42'], ['work', 'agent:work:telegram:group:-700']]) {
      const entry = (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(key!)}`)).json()) as { sessionId: string; agentId: string };
      expect(entry.agentId).toBe(agent);
      expect(existsSync(path.join(tmp.dir, 'data', 'agents', agent!, 'sessions', `${entry.sessionId}.jsonl`))).toBe(true);
    }
    expect(readdirSync(path.join(tmp.dir, 'data', 'agents', 'home', 'sessions'))).toHaveLength(1);
  });

  it('/v1/models lists the agents; model picks one ("agent:<id>" too); an unknown model is a 404 model_not_found', async () => {
    // A second provider no agent uses: its model routes nowhere, so it is not offered.
    await start({ providers: {
      default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 },
      spare: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-spare', maxRetries: 0 },
    } });
    const models = (await (await fetch(`${gw!.url}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id).slice(0, 2)).toEqual(['home', 'work']);
    const ask = (model: string) => fetch(`${gw!.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }) });
    const reply = async (model: string) => ((await (await ask(model)).json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
    expect(await reply('work')).toBe('work answers hi');
    expect(await reply('agent:home')).toBe('home answers hi');
    const missing = await ask('gpt-9000');
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string; type: string } }).error).toMatchObject({ code: 'model_not_found', type: 'invalid_request_error', param: 'model' });
    // Whatever the list offers routes: no listed model is a 404.
    for (const { id } of models.data) expect((await ask(id)).status, id).toBe(200);
  });

  it('re-keying: linking two peers moves their conversations at the next start (the most recent continues, the other is archived)', async () => {
    telegram = await startFakeTelegram();
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    const base = { channels: { telegram: { dmPolicy: 'open' } }, agents: { list: [{ id: 'main' }], defaults: { tools: { preset: 'none' } } } };
    await start({ ...base, session: { dmScope: 'per-peer', reset: { mode: 'off' } } }, env);
    telegram.pushUpdate(dm('I am alice on telegram'));
    await telegram.waitFor('sendMessage', (c) => Number(c.body.chat_id) === 42);
    telegram.pushUpdate(dm('I am bob', { from: BOB }));
    await telegram.waitFor('sendMessage', (c) => Number(c.body.chat_id) === 43);
    expect(await keys()).toEqual(['agent:main:direct:42', 'agent:main:direct:43']);
    const bobSession = ((await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent('agent:main:direct:43')}`)).json()) as { sessionId: string }).sessionId;
    await gw!.stop();

    await start({ ...base, session: { dmScope: 'per-peer', reset: { mode: 'off' }, identityLinks: { pat: ['telegram:42', 'telegram:43'] } } }, env);
    expect(await keys()).toEqual(['agent:main:direct:pat']);
    const moved = (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent('agent:main:direct:pat')}`)).json()) as { sessionId: string };
    expect(moved.sessionId).toBe(bobSession);
    telegram.pushUpdate(dm('still me', { from: BOB }));
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('still me'));
    const history = ((await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent('agent:main:direct:pat')}/history`)).json()) as { entries: TranscriptMessage[] }).entries;
    expect(history.filter((e) => e.role === 'user').map((e) => e.content)).toEqual(['I am bob', 'still me']);
    // Alice's older conversation is kept, not deleted.
    const archive = path.join(tmp.dir, 'data', 'archive', 'rekey');
    expect(readdirSync(archive)).toHaveLength(1);
    expect(readdirSync(path.join(tmp.dir, 'data', 'agents', 'main', 'sessions')).some((f) => f.includes('.jsonl.merged.'))).toBe(true);
  });

  it('re-keying stopped half-way completes at the next run with nothing lost or duplicated', async () => {
    await start({ session: { dmScope: 'per-peer', reset: { mode: 'off' } } });
    const say = (user: string, text: string) => fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }) });
    await say('ann', 'first words');
    await gw!.stop();
    gw = undefined;
    // Now webchat belongs to the work agent: ann's conversation moves to agent:work:direct:ann, transcript and all.
    const config = testConfig(tmp.dir, { agents: agents(), bindings: [b('work', { channel: 'webchat' })], session: { dmScope: 'per-peer' } });
    const store = await KeyvSessionStore.open(config.store);
    const transcripts = new AgentTranscriptStores({ stateDir: config.stateDir, agentIds: ['home', 'work'], logger: silentLogger() });
    const moves = await planRekey(allSessions(store), config);
    expect(moves).toEqual([expect.objectContaining({ from: 'agent:home:direct:ann', to: 'agent:work:direct:ann', action: 'move', toAgent: 'work' })]);
    for (const stopAt of ['transcript agent:home:direct:ann', 'entry agent:work:direct:ann']) {
      await expect(applyRekey(await planRekey(allSessions(store), config), { store, transcripts, stateDir: config.stateDir, logger: silentLogger(), now: Date.now(), afterStep: (step) => { if (step === stopAt) throw new Error('killed'); } })).rejects.toThrow('killed');
    }
    await applyRekey(await planRekey(allSessions(store), config), { store, transcripts, stateDir: config.stateDir, logger: silentLogger(), now: Date.now() });
    const entries = [];
    for await (const e of allSessions(store)) entries.push(e);
    expect(entries.map((e) => [e.key, e.agentId])).toEqual([['agent:work:direct:ann', 'work']]);
    const file = path.join(tmp.dir, 'data', 'agents', 'work', 'sessions', `${entries[0]!.sessionId}.jsonl`);
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; content?: string });
    expect(lines.filter((l) => l.type === 'message').map((l) => l.content)).toEqual(['first words', 'home answers first words']);
    expect(await planRekey(allSessions(store), config)).toEqual([]);
    await store.close();
    await transcripts.close();
  });
});
