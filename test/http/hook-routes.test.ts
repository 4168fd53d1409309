import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RefusalEvent } from '../../src/agent/turn-events.ts';
import type { InboundSink } from '../../src/core/channel-adapter.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { createHttpApp, type HttpApp } from '../../src/http/app.ts';
import { mountHookRoutes, withHookAuthExemption } from '../../src/http/hook-routes.ts';
import { mountJobRoutes } from '../../src/http/job-routes.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { FakeJobs } from './fake-jobs.ts';

const GATEWAY_TOKEN = 'gateway-token-abc';
const HOOKS_TOKEN = 'hooks-token-xyz';

/**
 * Webhooks (SPEC §17): `/hooks/*` open with `hooks.token` only, the gateway's token opens everything else, and
 * `/hooks/agent` runs a real turn through the gateway (offline provider) and answers its reply.
 */
describe('webhooks: /hooks/agent and /hooks/wake', () => {
  const tmp = tempDir('switchboard-hooks-');
  let gw: RunningGateway;
  const clock = new ManualClock('2026-12-02T07:00:00Z');

  beforeAll(async () => {
    gw = await startTestGateway({
      dir: tmp.dir, clock,
      config: { agents: { defaults: { tools: { preset: 'none' } }, list: [{ id: 'main' }, { id: 'helper' }] }, limits: { perSender: { perMinute: 2, burst: 2 } } },
      env: { TELEGRAM_BOT_TOKEN: '1:abc', TELEGRAM_API_ROOT: 'http://127.0.0.1:9' },
    });
  }, 30_000);
  afterAll(async () => {
    await gw?.stop();
    tmp.remove();
  });

  /** An app with the hooks, `/admin/jobs` and a fresh rate limiter, as `src/main.ts` wires them. */
  const build = (options: { sink?: InboundSink; jobs?: FakeJobs; token?: string; refusals?: RefusalEvent[] } = {}) => {
    const jobs = options.jobs ?? new FakeJobs();
    const token = options.token ?? HOOKS_TOKEN;
    const submitted: InboundMessage[] = [];
    const sink: InboundSink = (message, opts) => { submitted.push(message); return (options.sink ?? gw.gateway.sink)(message, opts); };
    const app: HttpApp = createHttpApp({
      authToken: GATEWAY_TOKEN, maxBodyBytes: gw.config.gateway.maxBodyBytes, logger: silentLogger(), channelRoutes: [],
      browserAuth: withHookAuthExemption(token),
      mounts: [
        mountHookRoutes({ token, sink, jobs, config: gw.config, clock, logger: silentLogger(), onRefusal: (e) => options.refusals?.push(e) }),
        mountJobRoutes({ jobs }),
      ],
    });
    const call = (path: string, init: { token?: string; body?: unknown; raw?: string; method?: string; from?: string } = {}) => app.request(path, {
      method: init.method ?? 'POST',
      headers: { host: '127.0.0.1', 'content-type': 'application/json', ...(init.token ? { authorization: `Bearer ${init.token}` } : {}) },
      ...(init.method === 'GET' ? {} : { body: init.raw ?? JSON.stringify(init.body ?? {}) }),
    }, { incoming: { socket: { remoteAddress: init.from ?? '10.0.0.1' } } });
    return { app, jobs, submitted, call };
  };

  it('refuses /hooks/* without a token, with a wrong one, and with the gateway\'s token (401)', async () => {
    const { call, submitted } = build();
    for (const token of [undefined, 'wrong-token', GATEWAY_TOKEN]) {
      for (const path of ['/hooks/agent', '/hooks/wake']) {
        const response = await call(path, { ...(token ? { token } : {}), body: { message: 'hi' } });
        expect(response.status, `${path} with ${token}`).toBe(401);
        expect(await response.json()).toMatchObject({ error: { code: 'unauthorized', message: expect.stringContaining('hooks.token') } });
      }
    }
    expect(submitted).toEqual([]);
  });

  it('the hooks token opens no other route: /admin/jobs, /status and an unknown /hooks path', async () => {
    const { call } = build();
    expect((await call('/admin/jobs', { method: 'GET', token: HOOKS_TOKEN })).status).toBe(401);
    expect((await call('/admin/jobs', { token: HOOKS_TOKEN, body: { schedule: '0 8 * * *' } })).status).toBe(401);
    expect((await call('/admin/jobs', { method: 'GET', token: GATEWAY_TOKEN })).status).toBe(200);
    // Under /hooks/ only the hooks token counts, also for a path with no route.
    expect((await call('/hooks/nothing', { token: GATEWAY_TOKEN })).status).toBe(401);
    expect((await call('/hooks/nothing', { token: HOOKS_TOKEN })).status).toBe(404);
  });

  it('without hooks.token nothing is mounted and /hooks/* stays behind the gateway token', async () => {
    const { call } = build({ token: '' });
    expect((await call('/hooks/agent', { token: HOOKS_TOKEN, body: { message: 'hi' } })).status).toBe(401);
    expect((await call('/hooks/agent', { token: GATEWAY_TOKEN, body: { message: 'hi' } })).status).toBe(404);
  });

  it('runs a turn in agent:main:main and answers its reply; the message is internal, kind hook', async () => {
    const { call, submitted } = build();
    const response = await call('/hooks/agent', { token: HOOKS_TOKEN, body: { message: 'the build is green' } });
    expect(response.status).toBe(200);
    const body = await response.json() as { sessionKey: string; correlationId: string; reply: string; outcome: string; sessionId: string };
    expect(body).toMatchObject({ sessionKey: 'agent:main:main', outcome: 'replied', correlationId: response.headers.get('x-correlation-id') });
    expect(body.reply).toMatch(/offline/i);
    expect(submitted).toHaveLength(1);
    expect(submitted[0]).toMatchObject({ channel: 'internal', text: 'the build is green', rateLimitKey: 'hook:10.0.0.1', internal: { kind: 'hook', sessionKey: 'agent:main:main' } });
    expect(submitted[0]!.internal?.deliverTo).toBeUndefined();
    const entry = await gw.sessions.get('agent:main:main');
    expect(entry?.sessionId).toBe(body.sessionId);
  });

  it('takes a session key (canonical), an agent id, and deliverTo as a delivery target', async () => {
    const { call, submitted } = build();
    const keyed = await call('/hooks/agent', { token: HOOKS_TOKEN, body: { message: 'a', sessionKey: 'AGENT:helper:hooks:direct:ci' } });
    expect(keyed.status).toBe(200);
    expect((await keyed.json() as { sessionKey: string }).sessionKey).toBe('agent:helper:hooks:direct:ci');
    const byAgent = await call('/hooks/agent', { token: HOOKS_TOKEN, body: { message: 'b', agentId: 'helper', deliverTo: { channel: 'telegram', group: '-100', threadId: '7' } } });
    expect(byAgent.status).toBe(200);
    expect(submitted[1]!.internal).toMatchObject({
      kind: 'hook', sessionKey: 'agent:helper:main',
      deliverTo: { channel: 'telegram', accountId: 'default', chatId: '-100', chatType: 'group', threadId: '7' },
    });
    const toPeer = await call('/hooks/agent', { token: HOOKS_TOKEN, body: { message: 'c', deliverTo: { channel: 'telegram', peer: '42' } }, from: '10.0.0.2' });
    expect(toPeer.status).toBe(200);
    expect(submitted[2]!.internal?.deliverTo).toEqual({ channel: 'telegram', accountId: 'default', chatId: '42', chatType: 'direct', peerId: '42' });
  });

  it('bad bodies are 400 with a code naming the problem, and run nothing', async () => {
    const { call, submitted } = build();
    const cases: [unknown, string][] = [
      [{}, 'missing_field'],
      [{ message: '   ' }, 'invalid_field'],
      [{ message: 42 }, 'invalid_field'],
      [{ message: 'hi', extra: 1 }, 'unknown_field'],
      [[1, 2], 'invalid_body'],
      [{ message: 'hi', sessionKey: 'not-a-key' }, 'invalid_session_key'],
      [{ message: 'hi', sessionKey: 'agent:main:main', agentId: 'helper' }, 'invalid_session_key'],
      [{ message: 'hi', agentId: 'nobody' }, 'unknown_agent'],
      [{ message: 'hi', sessionKey: 'agent:nobody:main' }, 'unknown_agent'],
      [{ message: 'hi', deliverTo: { channel: 'telegram' } }, 'invalid_field'],
      [{ message: 'hi', deliverTo: { channel: 'telegram', peer: '1', group: '2' } }, 'invalid_field'],
      [{ message: 'hi', deliverTo: { channel: 'irc', peer: '1' } }, 'invalid_field'],
      [{ message: 'hi', deliverTo: { channel: 'discord', peer: '1' } }, 'invalid_deliver_to'],
      [{ message: 'hi', deliverTo: { channel: 'telegram', accountId: 'other', peer: '1' } }, 'invalid_deliver_to'],
    ];
    for (const [body, code] of cases) {
      const response = await call('/hooks/agent', { token: HOOKS_TOKEN, body, from: `10.1.0.${cases.findIndex((c) => c[0] === body)}` });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect((await response.json() as { error: { code: string } }).error.code, JSON.stringify(body)).toBe(code);
    }
    const notJson = await call('/hooks/agent', { token: HOOKS_TOKEN, raw: '{"message":' });
    expect(notJson.status).toBe(400);
    expect((await notJson.json() as { error: { code: string } }).error.code).toBe('invalid_json');
    expect(submitted).toEqual([]);
  });

  it('over limits.perSender a caller gets 429 with Retry-After (and a refusal event); another address does not', async () => {
    const refusals: RefusalEvent[] = [];
    const { call, submitted } = build({ refusals });
    const say = (from: string) => call('/hooks/agent', { token: HOOKS_TOKEN, body: { message: 'ping' }, from });
    expect((await say('10.9.0.1')).status).toBe(200);
    expect((await say('10.9.0.1')).status).toBe(200);
    const limited = await say('10.9.0.1');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('30');
    expect(await limited.json()).toMatchObject({ error: { code: 'rate_limit_exceeded', type: 'rate_limit_error' } });
    expect(refusals).toEqual([expect.objectContaining({ reason: 'rate_limit', channel: 'internal' })]);
    expect(submitted).toHaveLength(2);
    expect((await say('10.9.0.2')).status).toBe(200);
    // The wake hook counts against the same bucket.
    expect((await call('/hooks/wake', { token: HOOKS_TOKEN, from: '10.9.0.1' })).status).toBe(429);
  });

  it('a submission the gateway rate-limits is a 429 too; one it does not run is a 409', async () => {
    const limitedSink: InboundSink = async () => ({ status: 'rate_limited', retryAfterSeconds: 12, correlationId: 'c', done: Promise.resolve(undefined) });
    const limited = await build({ sink: limitedSink }).call('/hooks/agent', { token: HOOKS_TOKEN, body: { message: 'x' } });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('12');
    const blockedSink: InboundSink = async () => ({ status: 'blocked', correlationId: 'c', done: Promise.resolve(undefined) });
    expect((await build({ sink: blockedSink }).call('/hooks/agent', { token: HOOKS_TOKEN, body: { message: 'x' } })).status).toBe(409);
  });

  it('/hooks/wake queues a heartbeat (202) or says there is none (409)', async () => {
    const { call, jobs } = build();
    const queued = await call('/hooks/wake', { token: HOOKS_TOKEN });
    expect(queued.status).toBe(202);
    expect(await queued.json()).toEqual({ queued: true });
    jobs.heartbeat = false;
    const none = await call('/hooks/wake', { token: HOOKS_TOKEN });
    expect(none.status).toBe(409);
    expect((await none.json() as { error: { code: string } }).error.code).toBe('no_heartbeat');
    expect(jobs.calls).toEqual([{ op: 'wake' }, { op: 'wake' }]);
  });

  it('refuses a hooks token equal to the gateway token, or one a bearer header cannot carry', () => {
    const deps = { sink: gw.gateway.sink, jobs: new FakeJobs(), config: gw.config, clock, logger: silentLogger() };
    expect(() => mountHookRoutes({ ...deps, token: 'x', config: { ...gw.config, gateway: { ...gw.config.gateway, authToken: 'x' } } })).toThrow(/must differ from gateway.authToken/);
    expect(() => mountHookRoutes({ ...deps, token: 'has space' })).toThrow(/may only hold/);
  });
});
