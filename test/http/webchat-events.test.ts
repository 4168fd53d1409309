import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { readSse, type SseReader } from '../dashboard/sse.ts';
import { userText, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { testConfig } from '../helpers/gateway.ts';
import { gatewayHttp } from '../helpers/gateway-http.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

const toolRounds = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
const firstUser = (r: RecordedRequest) => userText(r.body.messages.find((m) => m.role === 'user')?.content);
const lastMessage = (r: RecordedRequest) => r.body.messages.at(-1)!;
const search = (n: number): FakeReply => ({ toolCalls: [{ id: `t${n}`, name: 'memory_search', arguments: '{"query":"anything"}' }], usage: { prompt_tokens: 20, completion_tokens: 2 } });
const say = (content: string): FakeReply => ({ content, usage: { prompt_tokens: 20, completion_tokens: 3 } });

/** Later replies of the web chat: `GET /webchat/events` pushes what is sent to a user outside a request. */
describe('web chat event stream', () => {
  const fake = useFakeOpenAI();
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  let streams: SseReader[] = [];
  afterEach(async () => {
    await Promise.all(streams.map((s) => s.cancel()));
    streams = [];
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
    await gw.supervisor.firstAttempts();
  };
  const http = gatewayHttp(() => gw!.url!);
  const subscribe = async (user: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`${gw!.url}/webchat/events?user=${encodeURIComponent(user)}`, { headers });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const sse = readSse(response);
    streams.push(sse);
    return sse;
  };

  it('a goal run over 2 batches: the page\'s stream gets the final answer of the background batch, not the reply its request already had', async () => {
    fake.fallback = (r) => (toolRounds(r) < 3 ? search(toolRounds(r)) : say('goal reached: **3** searches'));
    await start({ agents: { defaults: { maxIterationsPerBatch: 2 } }, backgroundExecution: { enabled: true } });
    const events = await subscribe('alice');
    expect(await events.next()).toEqual({ event: 'ready', data: { user: 'alice', sessionKey: 'agent:main:direct:alice', exists: false } });
    expect(await http.say('alice', '/goal search 3 times')).toMatch(/^Goal set: search 3 times/);
    expect(await http.say('alice', 'go')).toMatch(/^This needs more than 2 steps\. I'm continuing in the background/);
    const reply = await events.next();
    expect(reply.event).toBe('reply');
    expect(reply.data).toMatchObject({ text: 'goal reached: **3** searches', kind: 'reply' });
    expect(fake.requests).toHaveLength(4);
  });

  it('a sessions_spawn child\'s answer reaches the web chat parent, and the parent\'s reply to it comes on the stream', async () => {
    fake.fallback = (r) => {
      if (firstUser(r) === 'summarize the plan') return say('The plan has three steps.');
      const last = lastMessage(r);
      if (last.role === 'user' && userText(last.content).startsWith('[subagent plan finished]')) return say('Your helper says: three steps.');
      if (last.role === 'tool') return say('Started a helper.');
      return { toolCalls: [{ id: 'w1', name: 'sessions_spawn', arguments: JSON.stringify({ prompt: 'summarize the plan', label: 'plan' }) }], usage: { prompt_tokens: 50, completion_tokens: 5 } };
    };
    await start();
    const events = await subscribe('alice');
    const other = await subscribe('bob');
    expect((await events.next()).event).toBe('ready');
    expect((await other.next()).event).toBe('ready');
    expect(await http.say('alice', 'please delegate')).toBe('Started a helper.');
    const reply = await events.next();
    expect(reply).toMatchObject({ event: 'reply', data: { text: 'Your helper says: three steps.', kind: 'reply' } });
    // A page opened now is told the session exists (it loads its history).
    expect((await (await subscribe('alice')).next()).data).toEqual({ user: 'alice', sessionKey: 'agent:main:direct:alice', exists: true });
    // Another user's page gets nothing; stopping the gateway ends both streams.
    await gw!.stop();
    gw = undefined;
    expect(await other.rest()).toEqual([]);
    expect(await events.rest()).toEqual([]);
  });

  it('needs the token like every other route, and refuses a name the web chat does not take', async () => {
    await start({ gateway: { authToken: 'events-token-1' } });
    const refused = await fetch(`${gw!.url}/webchat/events?user=alice`);
    expect(refused.status).toBe(401);
    const events = await subscribe('alice', { authorization: 'Bearer events-token-1' });
    expect(await events.next()).toEqual({ event: 'ready', data: { user: 'alice', sessionKey: 'agent:main:direct:alice', exists: false } });
    const badName = await fetch(`${gw!.url}/webchat/events?user=${encodeURIComponent('a b')}`, { headers: { authorization: 'Bearer events-token-1' } });
    expect(badName.status).toBe(400);
    expect(await badName.json()).toEqual({ error: { message: 'Field "user" must be 1-128 letters, digits or . _ @ + -.', type: 'invalid_request_error', code: 'invalid_user' } });
  });
});
