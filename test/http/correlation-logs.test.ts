import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';

describe('correlation id on every log line of a turn', () => {
  let fake: FakeOpenAI;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;
  afterEach(async () => {
    await gw?.stop();
    await fake.close();
    tmp.remove();
  });

  it('tags the lines of the gateway, the runtime and the API route with the request\'s correlation id', async () => {
    fake = await startFakeOpenAI();
    tmp = tempDir();
    const lines: Record<string, unknown>[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
        callback();
      },
    });
    gw = await startTestGateway({
      dir: tmp.dir, logger: createLogger({ level: 'debug', destination }),
      env: { OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-test' }, config: { providers: { default: { maxRetries: 0 } } },
    });
    const client = new OpenAI({ apiKey: 'x', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    fake.script.push({ status: 500, error: { message: 'upstream broke' } });
    const before = lines.length;
    await client.chat.completions.create({ model: 'main', user: 'logs', messages: [{ role: 'user', content: 'fail please' }] }, { headers: { 'X-Request-Id': 'log-corr-1' } }).catch(() => undefined);
    await client.chat.completions.create({ model: 'main', user: 'logs', messages: [{ role: 'user', content: 'now work' }] }, { headers: { 'X-Request-Id': 'log-corr-2' } });
    const during = lines.slice(before);
    expect(during.length).toBeGreaterThanOrEqual(3); // LLM call failed, turn failed, API turn did not reply
    expect(during.filter((l) => l.correlationId === undefined)).toEqual([]);
    expect(new Set(during.map((l) => l.correlationId))).toEqual(new Set(['log-corr-1', 'log-corr-2']));
    // One info line per turn: correlation id, channel, session key, duration, tokens, outcome.
    const turns = during.filter((l) => l.outcome !== undefined && l.durationMs !== undefined);
    expect(turns.map((l) => [l.correlationId, l.outcome])).toEqual([['log-corr-1', 'failed'], ['log-corr-2', 'replied']]);
    expect(turns[1]).toMatchObject({ level: 30, channel: 'api', sessionKey: 'agent:main:api:direct:logs', durationMs: expect.any(Number), tokens: { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, total: 15 } });
    expect(during.map((l) => l.msg)).toEqual(expect.arrayContaining(['LLM call failed', 'turn failed']));
    expect(during.find((l) => l.msg === 'LLM call failed')).toMatchObject({ sessionKey: 'agent:main:api:direct:logs' });
  });
});
