import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import type { InboundSink } from '../../src/core/channel-adapter.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { mountHookRoutes, withHookAuthExemption } from '../../src/http/hook-routes.ts';
import { FakeJobs } from './fake-jobs.ts';

const HOOKS_TOKEN = 'hooks-token-xyz';

const anything = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined));
const mostly = <T, U>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<U>, weight = 5) => fc.oneof({ weight, arbitrary: good }, { weight: 1, arbitrary: bad });
const text = fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 20 }), fc.string({ unit: 'binary', maxLength: 20 }), fc.constantFrom('', ' ', '\u0000', 'a'.repeat(5000)));
const key = fc.oneof(
  fc.constantFrom('agent:main:main', 'agent:helper:main', 'agent:main:telegram:group:-100:topic:7', 'agent:main:subagent:x', 'agent:main:job:daily', 'agent::main', 'agent:main', 'AGENT:MAIN:MAIN', 'agent:nobody:main', 'agent:main:a:b:c:d:e:f:g'),
  fc.array(fc.constantFrom('agent', 'main', 'direct', 'dm', 'group', 'thread', 'topic', 'x', '', '%3a', 'job'), { maxLength: 7 }).map((p) => p.join(':')),
  text,
);
const deliverTo = fc.record({
  channel: mostly(fc.constantFrom('telegram', 'discord', 'slack', 'webchat'), fc.oneof(fc.constantFrom('irc', 'TELEGRAM', ''), anything)),
  accountId: mostly(fc.constantFrom('default', 'other'), anything),
  peer: mostly(fc.constantFrom('42', 'alice'), anything),
  group: mostly(fc.constantFrom('-100', 'C123'), anything),
  threadId: mostly(fc.constantFrom('7', '1712.5'), anything),
  extra: anything,
}, { requiredKeys: ['channel'] });
/** Usually absent (a field a caller leaves out), else a good or a bad value. */
const optional = <T>(good: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 3, arbitrary: good }, { weight: 1, arbitrary: anything });
const body = fc.record({
  message: mostly(text, anything),
  sessionKey: optional(key),
  agentId: optional(fc.constantFrom('main', 'helper', 'nobody', 'MAIN')),
  deliverTo: optional(deliverTo),
  other: fc.oneof({ weight: 10, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: anything }),
}, { requiredKeys: [] });
const raw = fc.oneof(
  { weight: 6, arbitrary: body.map((b) => JSON.stringify(b)) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
  { weight: 1, arbitrary: body.map((b) => JSON.stringify(b)).chain((s) => fc.nat({ max: s.length }).map((n) => s.slice(0, n))) },
);

/** Whatever arrives at `/hooks/agent`, the answer is a JSON 200, 400 or 413, never a 500. */
describe('/hooks/agent body fuzz', () => {
  it('a few hundred bodies: never 500; a 200 only for a body that names a non-empty message, answered with the turn', async () => {
    const config = loadConfig({ cwd: '/tmp', env: {}, dotenv: false, overrides: { stateDir: '/tmp/switchboard-hook-fuzz', logLevel: 'silent', agents: { list: [{ id: 'main' }, { id: 'helper' }] }, channels: { telegram: { botToken: '1:abc' } }, gateway: { maxBodyBytes: 4096 } } });
    const submitted: InboundMessage[] = [];
    const sink: InboundSink = async (message) => {
      submitted.push(message);
      const sessionKey = message.internal!.sessionKey;
      return { status: 'accepted', sessionKey, correlationId: message.correlationId!, done: Promise.resolve({ sessionKey, sessionId: 's', correlationId: 'c', replies: [{ text: 'ok' }], usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } as never, usageEstimated: false, outcome: 'replied' as const }) };
    };
    const app = createHttpApp({
      authToken: 'gateway-token', maxBodyBytes: config.gateway.maxBodyBytes, logger: silentLogger(), channelRoutes: [], browserAuth: withHookAuthExemption(HOOKS_TOKEN),
      mounts: [mountHookRoutes({ token: HOOKS_TOKEN, sink, jobs: new FakeJobs(), config, clock: new ManualClock(0), logger: silentLogger() })],
    });
    const statuses = new Map<number, number>();
    await fc.assert(fc.asyncProperty(raw, async (payload) => {
      const before = submitted.length;
      const response = await app.request('/hooks/agent', { method: 'POST', headers: { authorization: `Bearer ${HOOKS_TOKEN}`, 'content-type': 'application/json' }, body: payload });
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      expect([200, 400, 413]).toContain(response.status);
      const answer = await response.json() as { error?: { code: string; message: string }; reply?: string; sessionKey?: string };
      if (response.status === 200) {
        expect(answer.reply).toBe('ok');
        expect(submitted).toHaveLength(before + 1);
        const sent = submitted.at(-1)!;
        expect(sent.text.trim()).not.toBe('');
        expect(sent.text).toBe((JSON.parse(payload) as { message: string }).message);
        expect(sent.internal?.sessionKey).toMatch(/^agent:(main|helper):/);
      } else {
        expect(answer.error?.message).toEqual(expect.any(String));
        expect(submitted).toHaveLength(before);
      }
    }), { numRuns: 400, seed: 29 });
    // The mix reaches the turn as well as the refusals.
    expect(statuses.get(200)).toBeGreaterThan(10);
    expect(statuses.get(400)).toBeGreaterThan(100);
  });
});
