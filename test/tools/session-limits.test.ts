import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { userText, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { testConfig } from '../helpers/gateway.ts';
import { gatewayHttp } from '../helpers/gateway-http.ts';
import { until } from '../helpers/wait.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

const conversation = (r: RecordedRequest) => r.body.messages.filter((m) => m.role !== 'system');
const firstUser = (r: RecordedRequest) => userText(conversation(r).find((m) => m.role === 'user')?.content);
const last = (r: RecordedRequest) => r.body.messages.at(-1)!;
const call = (id: string, name: string, args: Record<string, unknown>): FakeReply => ({ toolCalls: [{ id, name, arguments: JSON.stringify(args) }] });
const say = (content: string): FakeReply => ({ content });
/** A deferred the fake LLM can wait on. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => { open = resolve; });
  return { open, opened };
}
/** What a tool returned, as the model saw it: `result: <content>` is the fake's answer after a tool result. */
const resultOf = (reply: string) => reply.slice('result: '.length);

describe('session tools: limits and visibility', () => {
  const fake = useFakeOpenAI();
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const start = async (config: Record<string, unknown> = {}) => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        session: { dmScope: 'per-peer', reset: { mode: 'off' } }, ...config,
      }),
      logger: silentLogger(),
    });
    return gw;
  };
  const http = gatewayHttp(() => gw!.url!);

  it('maxSpawnDepth: a sub-agent at the deepest level allowed cannot spawn another; it is told why and goes on', async () => {
    fake.fallback = (r) => {
      const first = firstUser(r);
      if (first === 'level two') return say('grandchild ran');
      if (first === 'level one') return last(r).role === 'tool' ? say(`child saw: ${last(r).content}`) : call('d2', 'sessions_spawn', { prompt: 'level two', label: 'two' });
      if (last(r).role === 'user' && userText(last(r).content).startsWith('[subagent one finished]')) return say('parent heard back');
      return last(r).role === 'tool' ? say('spawned') : call('d1', 'sessions_spawn', { prompt: 'level one', label: 'one' });
    };
    await start({ tools: { sessions: { maxSpawnDepth: 1 } } });
    expect(await http.say('alice', 'delegate')).toBe('spawned');
    const parent = await until(async () => {
      const m = (await http.history('agent:main:direct:alice')).filter((e) => e.type === 'message');
      return m.at(-1)?.content === 'parent heard back' ? m : undefined;
    }, 'the child to report back');
    expect(parent.at(-2)!.content).toBe('[subagent one finished] child saw: Error: cannot spawn from here: sub-agents may nest 1 deep (tools.sessions.maxSpawnDepth). Do the work in this session instead.');
    expect(fake.requests.some((r) => firstUser(r) === 'level two')).toBe(false);
  });

  it('maxChildren: a parent with that many sub-agents still running cannot spawn one more', async () => {
    const children = gate();
    fake.fallback = async (r) => {
      const first = firstUser(r);
      if (first.startsWith('task ')) { await children.opened; return say(`${first} done`); }
      if (last(r).role === 'tool') return say('three asked');
      if (last(r).role === 'user' && userText(last(r).content).startsWith('[subagent')) return say('noted');
      return { toolCalls: [1, 2, 3].map((i) => ({ id: `k${i}`, name: 'sessions_spawn', arguments: JSON.stringify({ prompt: `task ${i}`, label: `t${i}` }) })) };
    };
    await start({ tools: { sessions: { maxChildren: 2 } } });
    expect(await http.say('alice', 'fan out')).toBe('three asked');
    const results = (await http.history('agent:main:direct:alice')).filter((e) => e.type === 'message' && e.role === 'tool');
    expect(results.map((e) => e.toolCallId)).toEqual(['k1', 'k2', 'k3']);
    expect(JSON.parse(results[0]!.content)).toMatchObject({ status: 'accepted' });
    expect(JSON.parse(results[1]!.content)).toMatchObject({ status: 'accepted' });
    expect(results[2]!.content).toBe('Error: 2 sub-agents of this session are still running (tools.sessions.maxChildren is 2). Wait for one to finish.');
    await until(() => fake.requests.filter((r) => firstUser(r).startsWith('task ')).length === 2 || undefined, 'the two children to run');
    children.open();
    await until(async () => (await http.history('agent:main:direct:alice')).filter((e) => e.type === 'message' && e.content === 'noted').length === 2 || undefined, 'both reports');
    expect(fake.requests.some((r) => firstUser(r) === 'task 3')).toBe(false);
  });

  for (const visibility of ['agent', 'all'] as const) {
    it(`visibility "${visibility}": list and history see ${visibility === 'agent' ? "the caller's agent's sessions only" : 'every session'}`, async () => {
      fake.fallback = (r) => {
        const lastMessage = last(r);
        if (lastMessage.role === 'tool') return say(`result: ${lastMessage.content}`);
        const text = userText(lastMessage.content);
        if (text === 'list sessions') return call('v1', 'sessions', { action: 'list' });
        if (text === 'read bob') return call('v2', 'sessions', { action: 'history', sessionKey: 'agent:other:direct:bob' });
        if (text === 'read carol') return call('v3', 'sessions', { action: 'history', sessionKey: 'agent:main:direct:carol' });
        return say(`hello ${text}`);
      };
      await start({
        agents: { list: [{ id: 'main' }, { id: 'other' }] },
        bindings: [{ agentId: 'other', match: { channel: 'webchat', peer: { kind: 'direct', id: 'bob' } } }],
        tools: { sessions: { visibility } },
      });
      await http.say('bob', 'bob here');
      await http.say('carol', 'carol here');
      const listed = JSON.parse(resultOf(await http.say('alice', 'list sessions'))) as { sessions: { key: string }[] };
      const keys = listed.sessions.map((s) => s.key).sort();
      expect(keys).toEqual(visibility === 'agent'
        ? ['agent:main:direct:alice', 'agent:main:direct:carol']
        : ['agent:main:direct:alice', 'agent:main:direct:carol', 'agent:other:direct:bob']);
      const carol = JSON.parse(resultOf(await http.say('alice', 'read carol'))) as { messages: { content: string }[] };
      expect(carol.messages.map((m) => m.content)).toEqual(['carol here', 'hello carol here']);
      const bob = resultOf(await http.say('alice', 'read bob'));
      if (visibility === 'agent') expect(bob).toBe('Error: no visible session has that key.');
      else expect((JSON.parse(bob) as { messages: { content: string }[] }).messages.map((m) => m.content)).toEqual(['bob here', 'hello bob here']);
    });
  }

  it('sessions send queues the message and returns at once, before the other session has run it', async () => {
    const carolTurn = gate();
    fake.fallback = async (r) => {
      const lastMessage = last(r);
      if (lastMessage.role === 'tool') return say(`result: ${lastMessage.content}`);
      const text = userText(lastMessage.content);
      if (text === 'tell carol') return call('s1', 'sessions', { action: 'send', sessionKey: 'agent:main:direct:carol', message: 'lunch at noon' });
      if (text === 'lunch at noon') { await carolTurn.opened; return say('noted, noon'); }
      return say(`hello ${text}`);
    };
    await start({ tools: { sessions: { visibility: 'agent' } } });
    await http.say('carol', 'carol here');
    expect(JSON.parse(resultOf(await http.say('alice', 'tell carol')))).toEqual({ status: 'accepted', sessionKey: 'agent:main:direct:carol' });
    // Alice's turn ended while Carol's run of the message is still held open.
    await until(() => fake.requests.some((r) => userText(last(r).content) === 'lunch at noon') || undefined, 'carol to get the message');
    expect((await http.history('agent:main:direct:carol')).some((e) => e.content === 'noted, noon')).toBe(false);
    carolTurn.open();
    await until(async () => (await http.history('agent:main:direct:carol')).some((e) => e.content === 'noted, noon') || undefined, 'carol to answer');
  });
});
