import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import type { Binding } from '../../src/config/schema.ts';
import { createLogger, silentLogger, type Logger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { KeyvSessionStore } from '../../src/sessions/store.ts';
import type { TranscriptMessage } from '../../src/sessions/transcript.ts';
import { userText, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { dm } from '../channels/telegram/updates.ts';
import { testConfig } from '../helpers/gateway.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

const b = (agentId: string, match: Record<string, unknown>) => ({ agentId, match }) as Binding;
const system = (r: RecordedRequest) => r.body.messages[0]!.content ?? '';

/** A logger whose lines a test can read. */
function recordingLogger(): { logger: Logger; lines: () => { level: number; msg: string }[] } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk: Buffer) => { text += chunk.toString(); });
  return {
    logger: createLogger({ level: 'info', destination: stream }),
    lines: () => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { level: number; msg: string }),
  };
}

describe('re-keying at start', () => {
  const fake = useFakeOpenAI((r) => ({ content: `${/I am (\w+)/.exec(system(r))?.[1] ?? '?'} answers ${userText(r.body.messages.at(-1)!.content)}`, usage: null }));
  let telegram: FakeTelegram | undefined;
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await telegram?.close();
    telegram = undefined;
  });

  const data = (...parts: string[]) => path.join(tmp.dir, 'data', ...parts);
  const configOf = (config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => testConfig(tmp.dir, {
    providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
    agents: { list: [{ id: 'main', systemPrompt: 'I am main.' }, { id: 'work', systemPrompt: 'I am work.' }], defaults: { tools: { preset: 'none' } } },
    ...config,
  }, env);
  const start = async (config: Record<string, unknown>, options: { env?: NodeJS.ProcessEnv; logger?: Logger; afterStep?: (step: string) => void } = {}) => {
    gw = await startGateway({ config: configOf(config, options.env), logger: options.logger ?? silentLogger(), rekeyHooks: { afterStep: options.afterStep } });
    return gw;
  };
  const stop = async () => {
    await gw?.stop();
    gw = undefined;
  };
  const say = async (user: string, text: string) => {
    const res = await fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }) });
    expect(res.status).toBe(200);
  };
  const sessions = async () => ((await (await fetch(`${gw!.url}/admin/sessions`)).json()) as { sessions: { key: string; sessionId: string; agentId: string }[] }).sessions
    .map((s) => [s.key, s.agentId]).sort();
  const entry = async (key: string) => (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(key)}`)).json()) as { sessionId: string; agentId: string; parentKey?: string };
  const history = async (key: string) => ((await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(key)}/history`)).json()) as { entries: TranscriptMessage[] }).entries
    .filter((e) => e.role === 'user' || e.role === 'assistant').map((e) => e.content);
  const header = (agent: string, sessionId: string) => JSON.parse(readFileSync(data('agents', agent, 'sessions', `${sessionId}.jsonl`), 'utf8').split('\n')[0]!) as { key: string; formerKeys?: string[] };

  it('a dmScope "main" conversation follows a new binding of its channel (history, folder and header move; a shared session is warned about)', async () => {
    telegram = await startFakeTelegram();
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    const channels = { telegram: { dmPolicy: 'open' } };
    await start({ channels, session: { reset: { mode: 'off' } } }, { env });
    await say('ann', 'hello from the web');
    telegram.pushUpdate(dm('hello from telegram'));
    await telegram.waitFor('sendMessage', (c) => Number(c.body.chat_id) === 42);
    expect(await sessions()).toEqual([['agent:main:main', 'main']]);
    const before = (await entry('agent:main:main')).sessionId;
    await stop();

    const logs = recordingLogger();
    await start({ channels, session: { reset: { mode: 'off' } }, bindings: [b('work', { channel: 'webchat' })] }, { env, logger: logs.logger });
    expect(await sessions()).toEqual([['agent:work:main', 'work']]);
    expect((await entry('agent:work:main')).sessionId).toBe(before);
    expect(existsSync(data('agents', 'work', 'sessions', `${before}.jsonl`))).toBe(true);
    expect(existsSync(data('agents', 'main', 'sessions', `${before}.jsonl`))).toBe(false);
    expect(header('work', before).key).toBe('agent:work:main');
    const warning = logs.lines().find((l) => l.level === 40 && l.msg.includes('shared by several channels'));
    expect(warning).toMatchObject({ from: 'agent:main:main', to: 'agent:work:main', startedOn: 'webchat:default', lastUsedOn: 'telegram:default' });
    await say('ann', 'still here');
    expect(await history('agent:work:main')).toEqual(['hello from the web', 'main answers hello from the web', 'hello from telegram', 'main answers hello from telegram', 'still here', 'work answers still here']);
  });

  it('swapped identity links: each conversation continues under its new key, nothing is archived', async () => {
    const links = (a: string, c: string) => ({ session: { dmScope: 'per-peer', reset: { mode: 'off' }, identityLinks: { a: [a], c: [c] } } });
    await start(links('webchat:ann', 'webchat:bob'));
    await say('ann', 'ann one');
    await say('bob', 'bob one');
    const ann = (await entry('agent:main:direct:a')).sessionId;
    const bob = (await entry('agent:main:direct:c')).sessionId;
    await stop();

    await start(links('webchat:bob', 'webchat:ann'));
    expect(await sessions()).toEqual([['agent:main:direct:a', 'main'], ['agent:main:direct:c', 'main']]);
    expect((await entry('agent:main:direct:a')).sessionId).toBe(bob);
    expect((await entry('agent:main:direct:c')).sessionId).toBe(ann);
    await say('ann', 'ann two');
    expect(await history('agent:main:direct:c')).toEqual(['ann one', 'main answers ann one', 'ann two', 'main answers ann two']);
    expect(await history('agent:main:direct:a')).toEqual(['bob one', 'main answers bob one']);
    expect(header('main', ann)).toMatchObject({ key: 'agent:main:direct:c', formerKeys: ['agent:main:direct:a'] });
    // The timeline keeps the turns from before the move (the ledger filed them under the former key).
    const timeline = (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent('agent:main:direct:c')}/timeline`)).json()) as { sessionId: string; turns: { sessionKey: string; sessionId: string }[] };
    expect(timeline.sessionId).toBe(ann);
    expect(timeline.turns.map((t) => [t.sessionKey, t.sessionId])).toEqual([['agent:main:direct:a', ann], ['agent:main:direct:c', ann]]);
    const bobs = (await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent('agent:main:direct:a')}/timeline`)).json()) as { turns: { sessionKey: string; sessionId: string }[] };
    expect(bobs.turns.map((t) => [t.sessionKey, t.sessionId])).toEqual([['agent:main:direct:c', bob]]);
    expect(existsSync(data('archive', 'rekey'))).toBe(false);
  });

  it('a swap killed at any step (also while one conversation is parked under a temporary key) completes at the next start', async () => {
    const links = (a: string, c: string) => ({ session: { dmScope: 'per-peer', reset: { mode: 'off' }, identityLinks: { a: [a], c: [c] } } });
    const before = async () => {
      rmSync(data(), { recursive: true, force: true });
      await start(links('webchat:ann', 'webchat:bob'));
      await say('ann', 'ann one');
      await say('bob', 'bob one');
      await stop();
    };
    await before();
    const steps: string[] = [];
    await start(links('webchat:bob', 'webchat:ann'), { afterStep: (s) => steps.push(s) });
    await stop();
    expect(steps.filter((s) => s.startsWith('entry '))).toEqual([expect.stringMatching(/^entry agent:rekey-[0-9a-f-]+:direct:c$/), 'entry agent:main:direct:a', 'entry agent:main:direct:c']);
    // The temporary key is named after the session id, new in every round.
    const general = (s: string) => s.replace(/rekey-[0-9a-f-]+/, 'rekey-*');
    for (const step of steps.map(general)) {
      await before();
      await expect(start(links('webchat:bob', 'webchat:ann'), { afterStep: (s) => { if (general(s) === step) throw new Error('killed'); } })).rejects.toThrow('killed');
      await start(links('webchat:bob', 'webchat:ann'));
      expect([step, await sessions()]).toEqual([step, [['agent:main:direct:a', 'main'], ['agent:main:direct:c', 'main']]]);
      expect([step, await history('agent:main:direct:c')]).toEqual([step, ['ann one', 'main answers ann one']]);
      expect([step, await history('agent:main:direct:a')]).toEqual([step, ['bob one', 'main answers bob one']]);
      expect(readdirSync(data('agents', 'main', 'sessions'))).toHaveLength(2);
      expect(existsSync(data('archive', 'rekey'))).toBe(false);
      await stop();
    }
  });

  it('a link handed from one peer to another: the old holder moves out before the new one moves in', async () => {
    const link = (id: string) => ({ session: { dmScope: 'per-peer', reset: { mode: 'off' }, identityLinks: { pat: [id] } } });
    await start(link('webchat:ann'));
    await say('ann', 'ann one');
    await say('bob', 'bob one');
    expect(await sessions()).toEqual([['agent:main:direct:bob', 'main'], ['agent:main:direct:pat', 'main']]);
    await stop();

    await start(link('webchat:bob'));
    expect(await sessions()).toEqual([['agent:main:direct:ann', 'main'], ['agent:main:direct:pat', 'main']]);
    expect(await history('agent:main:direct:ann')).toEqual(['ann one', 'main answers ann one']);
    expect(await history('agent:main:direct:pat')).toEqual(['bob one', 'main answers bob one']);
    expect(existsSync(data('archive', 'rekey'))).toBe(false);
  });

  it('a spawned child follows its parent: its parentKey names the parent\'s new key', async () => {
    const perPeer = { session: { dmScope: 'per-peer', reset: { mode: 'off' } } };
    await start(perPeer);
    await say('ann', 'first words');
    await stop();
    const config = configOf(perPeer);
    const store = await KeyvSessionStore.open(config.store);
    const parent = (await store.get('agent:main:direct:ann'))!;
    await store.set({ ...parent, key: 'agent:main:subagent:x1', sessionId: '00000000-0000-4000-8000-0000000000c1', channel: 'internal', parentKey: 'agent:main:direct:ann', spawnDepth: 1 });
    await store.close();
    await start({ ...perPeer, bindings: [b('work', { channel: 'webchat' })] });
    expect(await sessions()).toEqual([['agent:main:subagent:x1', 'main'], ['agent:work:direct:ann', 'work']]);
    expect(await entry('agent:main:subagent:x1')).toMatchObject({ parentKey: 'agent:work:direct:ann' });
  });

  it('a state folder without routing.json (older than bindings) is re-keyed at its first start', async () => {
    const perPeer = { session: { dmScope: 'per-peer', reset: { mode: 'off' } } };
    await start(perPeer);
    await say('ann', 'first words');
    await stop();
    rmSync(data('routing.json'));
    await start({ ...perPeer, bindings: [b('work', { channel: 'webchat' })] });
    expect(await sessions()).toEqual([['agent:work:direct:ann', 'work']]);
    expect(await history('agent:work:direct:ann')).toEqual(['first words', 'main answers first words']);
    expect(readFileSync(data('routing.json'), 'utf8')).toContain('"agentId":"work"');
  });

  it('a gateway killed at any step of a move starts again and finishes it: one entry, every message once', async () => {
    const perPeer = { session: { dmScope: 'per-peer', reset: { mode: 'off' } } };
    const moved = { ...perPeer, bindings: [b('work', { channel: 'webchat' })] };
    for (const step of ['transcript agent:main:direct:ann', 'entry agent:work:direct:ann', 'children agent:main:direct:ann', 'deleted agent:main:direct:ann']) {
      rmSync(data(), { recursive: true, force: true });
      await start(perPeer);
      await say('ann', 'first words');
      await stop();
      const fingerprint = readFileSync(data('routing.json'), 'utf8');
      const seen: string[] = [];
      await expect(start(moved, { afterStep: (s) => { seen.push(s); if (s === step) throw new Error(`killed at ${s}`); } })).rejects.toThrow(`killed at ${step}`);
      expect(seen.at(-1)).toBe(step);
      expect(readFileSync(data('routing.json'), 'utf8')).toBe(fingerprint);
      await start(moved);
      expect([step, await sessions()]).toEqual([step, [['agent:work:direct:ann', 'work']]]);
      expect([step, await history('agent:work:direct:ann')]).toEqual([step, ['first words', 'main answers first words']]);
      expect(readdirSync(data('agents', 'work', 'sessions'))).toHaveLength(1);
      expect(readdirSync(data('agents', 'main', 'sessions'))).toHaveLength(0);
      expect(readFileSync(data('routing.json'), 'utf8')).not.toBe(fingerprint);
      await stop();
    }
  });

  it('a merge killed at its archive step: the next start keeps one entry and one archived copy', async () => {
    const perPeer = { dmScope: 'per-peer', reset: { mode: 'off' } };
    await start({ session: perPeer });
    await say('ann', 'older');
    await say('bob', 'newer');
    await stop();
    const fingerprint = readFileSync(data('routing.json'), 'utf8');
    const linked = { session: { ...perPeer, identityLinks: { pat: ['webchat:ann', 'webchat:bob'] } } };
    await expect(start(linked, { afterStep: (s) => { if (s === 'archive agent:main:direct:ann') throw new Error('killed'); } })).rejects.toThrow('killed');
    expect(readFileSync(data('routing.json'), 'utf8')).toBe(fingerprint);
    await start(linked);
    expect(await sessions()).toEqual([['agent:main:direct:pat', 'main']]);
    expect(await history('agent:main:direct:pat')).toEqual(['newer', 'main answers newer']);
    expect(readdirSync(data('archive', 'rekey'))).toHaveLength(1);
    const files = readdirSync(data('agents', 'main', 'sessions'));
    expect(files.filter((f) => f.includes('.jsonl.merged.'))).toHaveLength(1);
    expect(files.filter((f) => f.endsWith('.jsonl'))).toHaveLength(1);
  });
});
