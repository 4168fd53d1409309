import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { readSse, type SseReader } from '../dashboard/sse.ts';
import type { FakeReply } from '../fakes/fake-openai.ts';
import { testConfig } from '../helpers/gateway.ts';
import { gatewayHttp } from '../helpers/gateway-http.ts';
import { until } from '../helpers/wait.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

/**
 * SPEC §11: a closed web page never cancels a run. A page that goes away in the middle of a turn (its
 * `POST /webchat/messages` aborted) leaves the turn running: the answer is in the transcript and reaches the
 * user's other open pages through `GET /webchat/events`.
 */
describe('a web chat page closed mid-turn', () => {
  const fake = useFakeOpenAI(() => new Promise<FakeReply>((resolve) => { release = resolve; }));
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  let events: SseReader | undefined;
  let release: (reply: FakeReply) => void = () => undefined;

  beforeEach(async () => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        session: { dmScope: 'per-peer', reset: { mode: 'off' } }, agents: { defaults: { tools: { preset: 'none' } } },
      }),
      logger: silentLogger(),
    });
    await gw.supervisor.firstAttempts();
  });
  afterEach(async () => {
    await events?.cancel();
    events = undefined;
    await gw?.stop();
    gw = undefined;
  });

  const http = gatewayHttp(() => gw!.url!);

  for (const accept of ['application/json', 'text/event-stream']) {
    it(`(${accept}) the answer released after the page went away is in the history and pushed to the open page`, async () => {
      const response = await fetch(`${gw!.url}/webchat/events?user=alice`);
      events = readSse(response);
      expect(await events.next()).toEqual({ event: 'ready', data: { user: 'alice', sessionKey: 'agent:main:direct:alice', exists: false } });

      const page = new AbortController();
      const posted = fetch(`${gw!.url}/webchat/messages`, {
        method: 'POST', headers: { 'content-type': 'application/json', accept }, body: JSON.stringify({ user: 'alice', text: 'what is the plan?' }), signal: page.signal,
      }).then(async (r) => { await r.text(); });
      await until(() => fake.requests.length === 1, 'the turn to reach the provider');
      page.abort();
      await expect(posted).rejects.toThrow();
      // One more round trip, so the server has seen the closed connection before the provider answers.
      expect((await fetch(`${gw!.url}/healthz`)).status).toBe(200);
      release({ content: 'The plan has three steps.', usage: { prompt_tokens: 20, completion_tokens: 6 } });

      expect(await events.next()).toEqual({ event: 'reply', data: { text: 'The plan has three steps.', kind: 'reply', at: expect.any(Number) } });
      const history = await until(async () => {
        const entries = await http.history('agent:main:direct:alice');
        return entries.some((e) => e.role === 'assistant') && entries;
      }, 'the answer in the transcript');
      expect(history.map((e) => [e.role, e.content])).toEqual([['user', 'what is the plan?'], ['assistant', 'The plan has three steps.']]);
      expect((await http.entry('agent:main:direct:alice')).runState).toBe('idle');
    });
  }
});
