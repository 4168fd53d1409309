import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../src/main.ts';
import type { TranscriptMessage } from '../../src/sessions/transcript.ts';
import { userText, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { sentTo } from '../channels/telegram/harness.ts';
import { dm, groupMessage } from '../channels/telegram/updates.ts';
import { manualTimers, type ManualTimers } from './timers.ts';
import { until } from '../helpers/wait.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

type Wire = RecordedRequest['body']['messages'][number];
const conversation = (r: RecordedRequest) => r.body.messages.filter((m) => m.role !== 'system');
const firstUser = (r: RecordedRequest) => userText(conversation(r).find((m) => m.role === 'user')?.content);
const last = (r: RecordedRequest): Wire => r.body.messages.at(-1)!;
const call = (id: string, name: string, args: Record<string, unknown>): FakeReply => ({
  toolCalls: [{ id, name, arguments: JSON.stringify(args) }], usage: { prompt_tokens: 50, completion_tokens: 5 },
});
const say = (content: string): FakeReply => ({ content, usage: { prompt_tokens: 50, completion_tokens: 5 } });
/** A deferred the fake LLM can wait on. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => { open = resolve; });
  return { open, opened };
}


describe('session tools', () => {
  const fake = useFakeOpenAI();
  let telegram: FakeTelegram | undefined;
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  let timers: ManualTimers;

  beforeEach(async () => {
    timers = manualTimers();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await telegram?.close();
    telegram = undefined;
  });

  const start = async (config: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = {}) => {
    const { startGateway } = await import('../../src/main.ts');
    const { testConfig } = await import('../helpers/gateway.ts');
    const { silentLogger } = await import('../../src/core/logger.ts');
    gw = await startGateway({
      config: testConfig(tmp.dir, { providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } }, session: { reset: { mode: 'off' } }, ...config }, env),
      logger: silentLogger(), toolTimeout: timers.timeout,
    });
    return gw;
  };
  const webchat = async (user: string, text: string) => {
    const response = await fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }) });
    return (await response.json()) as { reply: string; sessionKey: string; correlationId: string };
  };
  const transcript = async (key: string) => {
    const body = await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(key)}/history`)).json() as { entries: TranscriptMessage[] };
    return body.entries.filter((e) => e.type === 'message');
  };
  const toolResults = (name: string) => fake.requests.flatMap((r) => {
    const calls = new Map<string, string>();
    for (const m of r.body.messages) for (const c of (m.tool_calls ?? []) as { id: string; function: { name: string } }[]) calls.set(c.id, c.function.name);
    return r.body.messages.filter((m) => m.role === 'tool' && calls.get(m.tool_call_id ?? '') === name).map((m) => m.content ?? '');
  });

  it('sessions_spawn returns at once; the child runs on its own key and its answer comes back to the parent, who answers in Telegram', async () => {
    telegram = await startFakeTelegram();
    const child = gate();
    fake.fallback = async (r) => {
      if (firstUser(r) === 'find facts about cats') {
        await child.opened;
        return say('Cats sleep about 16 hours a day.');
      }
      const lastMessage = last(r);
      if (lastMessage.role === 'user' && userText(lastMessage.content).startsWith('[subagent cats finished]')) return say('Update from my helper: cats sleep a lot.');
      if (lastMessage.role === 'tool') return say('I asked a helper; I will report back.');
      return call('s1', 'sessions_spawn', { prompt: 'find facts about cats', label: 'cats' });
    };
    await start({ channels: { telegram: { dmPolicy: 'open' } } }, { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    telegram.pushUpdate(dm('research cats'));
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('I asked a helper'));
    // The parent answered while the child's LLM call was still held open: spawn did not wait for it.
    const spawned = JSON.parse(toolResults('sessions_spawn')[0]!) as { status: string; sessionKey: string; sessionId: string; label: string };
    expect(spawned).toMatchObject({ status: 'accepted', label: 'cats' });
    expect(spawned.sessionKey).toMatch(/^agent:main:subagent:[0-9a-f-]{36}$/);
    const entry = await (await fetch(`${gw!.url}/admin/sessions/${encodeURIComponent(spawned.sessionKey)}`)).json() as Record<string, unknown>;
    expect(entry).toMatchObject({ key: spawned.sessionKey, sessionId: spawned.sessionId, parentKey: 'agent:main:main', channel: 'internal', spawnDepth: 1 });

    child.open();
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes('Update from my helper'));
    expect(sentTo(telegram, 42).map((c) => c.body.text)).toEqual(['I asked a helper; I will report back.', 'Update from my helper: cats sleep a lot.']);
    const parent = await transcript('agent:main:main');
    expect(parent.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user', 'assistant']);
    expect(parent[4]!.content).toBe('[subagent cats finished] Cats sleep about 16 hours a day.');
    const childMessages = await transcript(spawned.sessionKey);
    expect(childMessages.map((m) => [m.role, m.content])).toEqual([['user', 'find facts about cats'], ['assistant', 'Cats sleep about 16 hours a day.']]);

    // The child's ledger records carry the spawning turn's correlation id.
    await gw!.accounting.flush();
    const records = (await (await fetch(`${gw!.url}/admin/providers`)).json() as { recentTurns: { sessionKey: string; correlationId: string; parentCorrelationId?: string; toolCalls?: string[] }[] }).recentTurns;
    // Newest first: the parent's first call asked for sessions_spawn (shown in the timeline), its second asked for nothing.
    expect(records.filter((x) => x.sessionKey === 'agent:main:main').reverse().map((x) => x.toolCalls)).toEqual([['sessions_spawn'], undefined, undefined]);
    const parentTurn = records.filter((x) => x.sessionKey === 'agent:main:main').at(-1)!;
    const childRecord = records.find((x) => x.sessionKey === spawned.sessionKey)!;
    expect(childRecord.parentCorrelationId).toBe(parentTurn.correlationId);
    expect(records.find((x) => x.sessionKey === 'agent:main:main' && x.parentCorrelationId === parentTurn.correlationId)).toBeDefined();
  });

  it('a web chat parent gets its sub-agent result as a new turn in its own session', async () => {
    fake.fallback = (r) => {
      if (firstUser(r) === 'summarize the plan') return say('The plan has three steps.');
      const lastMessage = last(r);
      if (lastMessage.role === 'user' && userText(lastMessage.content).startsWith('[subagent plan finished]')) return say('Your helper says: three steps.');
      if (lastMessage.role === 'tool') return say('Started a helper.');
      return call('w1', 'sessions_spawn', { prompt: 'summarize the plan', label: 'plan' });
    };
    await start({ session: { dmScope: 'per-peer', reset: { mode: 'off' } } });
    expect((await webchat('alice', 'please delegate')).reply).toBe('Started a helper.');
    const parent = await until(async () => {
      const m = await transcript('agent:main:direct:alice');
      return m.length === 6 ? m : undefined;
    }, 'the sub-agent result turn');
    expect(parent.slice(-2).map((m) => m.content)).toEqual(['[subagent plan finished] The plan has three steps.', 'Your helper says: three steps.']);
  });

  it('sessions_yield with maxConcurrent 1 gives its slot back (no deadlock) and returns the other session\'s answer', async () => {
    fake.fallback = (r) => {
      const first = firstUser(r);
      const lastMessage = last(r);
      if (first === 'be a helper') {
        if (lastMessage.role === 'user' && userText(lastMessage.content) === 'what is 6*7?') return say('42');
        return say('ready');
      }
      if (lastMessage.role === 'user' && userText(lastMessage.content).startsWith('[subagent')) return say('noted');
      const results = conversation(r).filter((m) => m.role === 'tool');
      if (results.length === 0) return call('y0', 'sessions_spawn', { prompt: 'be a helper', label: 'helper' });
      if (results.length === 1) {
        const key = (JSON.parse(results[0]!.content!) as { sessionKey: string }).sessionKey;
        return call('y1', 'sessions_yield', { sessionKey: key, message: 'what is 6*7?', timeoutSeconds: 30 });
      }
      return say(`The helper said: ${(JSON.parse(results[1]!.content!) as { reply: string }).reply}`);
    };
    await start({ agents: { defaults: { maxConcurrent: 1 } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } } });
    expect((await webchat('alice', 'ask your helper')).reply).toBe('The helper said: 42');
    expect(JSON.parse(toolResults('sessions_yield')[0]!)).toEqual({ status: 'ok', reply: '42' });
  });

  it('sessions_yield times out (the other run goes on) and refuses waiting on itself or on a session that waits on it', async () => {
    const held = gate();
    let helperKey = '';
    fake.fallback = async (r) => {
      const first = firstUser(r);
      const lastMessage = last(r);
      if (first === 'slow helper') {
        if (lastMessage.role === 'user' && userText(lastMessage.content) === 'slow question') { await held.opened; return say('slow answer'); }
        if (lastMessage.role === 'user' && userText(lastMessage.content) === 'wait on your parent') return call('c1', 'sessions_yield', { sessionKey: 'agent:main:direct:alice', message: 'hi' });
        if (lastMessage.role === 'tool') return say(`helper saw: ${lastMessage.content}`);
        return say('ready');
      }
      if (lastMessage.role === 'user' && userText(lastMessage.content).startsWith('[subagent')) return say('noted');
      if (lastMessage.role === 'user' && userText(lastMessage.content) === 'self') return call('s0', 'sessions_yield', { sessionKey: 'agent:main:direct:alice', message: 'me?' });
      if (lastMessage.role === 'user' && userText(lastMessage.content) === 'start') return call('t0', 'sessions_spawn', { prompt: 'slow helper', label: 'slow' });
      if (lastMessage.role === 'user' && userText(lastMessage.content) === 'ask slowly') return call('t1', 'sessions_yield', { sessionKey: helperKey, message: 'slow question', timeoutSeconds: 7 });
      if (lastMessage.role === 'user' && userText(lastMessage.content) === 'cycle') return call('t2', 'sessions_yield', { sessionKey: helperKey, message: 'wait on your parent', timeoutSeconds: 9 });
      return say(`parent saw: ${lastMessage.content}`);
    };
    await start({ tools: { sessions: { visibility: 'all' } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } } });
    expect((await webchat('alice', 'self')).reply).toBe('parent saw: Error: refused: a session cannot wait on itself.');

    await webchat('alice', 'start');
    helperKey = (JSON.parse(toolResults('sessions_spawn')[0]!) as { sessionKey: string }).sessionKey;
    await until(async () => (await transcript(helperKey)).length === 2, 'the helper to be ready');

    const slow = webchat('alice', 'ask slowly');
    await timers.waitForPending(2);
    timers.fire(7000);
    expect((await slow).reply).toBe(`parent saw: ${JSON.stringify({ status: 'timeout', note: 'No answer within 7 s; the other session\'s run goes on.' })}`);
    held.open();
    await until(async () => (await transcript(helperKey)).some((m) => m.content === 'slow answer'), 'the helper to finish its slow answer anyway');

    // alice waits on the helper, whose turn then tries to wait on alice: refused, and both answer.
    const cycle = await webchat('alice', 'cycle');
    expect(cycle.reply).toContain('"status":"ok"');
    expect(cycle.reply).toContain('helper saw: Error: refused: agent:main:direct:alice is waiting on this session');
  });

  it('under visibility "tree" a group session cannot list or read a DM session; the answer reveals nothing', async () => {
    telegram = await startFakeTelegram();
    fake.fallback = (r) => {
      const lastMessage = last(r);
      if (lastMessage.role === 'tool') return say(`result: ${lastMessage.content}`);
      const text = userText(lastMessage.content);
      if (text.endsWith('list sessions')) return call('v1', 'sessions', { action: 'list' });
      if (text.endsWith('read the dm')) return call('v2', 'sessions', { action: 'history', sessionKey: 'agent:main:main' });
      if (text.endsWith('read nothing')) return call('v3', 'sessions', { action: 'history', sessionKey: 'agent:main:subagent:nope' });
      return say('hello');
    };
    await start({ channels: { telegram: { dmPolicy: 'open', groupPolicy: 'open', requireMention: false } } }, { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    telegram.pushUpdate(dm('my secret is 1234'));
    await telegram.waitFor('sendMessage', (c) => c.body.text === 'hello');
    telegram.pushUpdate(groupMessage(-500, 'list sessions'));
    const listed = await telegram.waitFor('sendMessage', (c) => String(c.body.text).startsWith('result:') && Number(c.body.chat_id) === -500);
    const list = JSON.parse(String(listed.body.text).slice('result: '.length)) as { sessions: { key: string }[] };
    expect(list.sessions.map((s) => s.key)).toEqual(['agent:main:telegram:group:-500']);
    telegram.pushUpdate(groupMessage(-500, 'read the dm'));
    telegram.pushUpdate(groupMessage(-500, 'read nothing'));
    await until(() => sentTo(telegram!, -500).length >= 3 || undefined, 'three group answers');
    const [, denied, missing] = sentTo(telegram, -500).map((c) => String(c.body.text));
    expect(denied).toBe(missing);
    expect(denied).toBe('result: Error: no visible session has that key.');
    expect(JSON.stringify(fake.requests.filter((r) => JSON.stringify(r.body.messages).includes('group')).map((r) => r.body.messages))).not.toContain('1234');
  });
});
