import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { until } from '../helpers/wait.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

/** A message replayed from the journal after a stop has its token counts warmed before its turn, as a fresh one does (issue 16). */
describe('token-count warming of replayed messages', () => {
  const tmp = useTempDir('switchboard-replay-warm-');
  const fake = useFakeOpenAI();
  let gw: RunningGateway | undefined;
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const start = async (channel: TestChannel, lines: string[] = []) => {
    gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel],
      logger: createLogger({ level: 'debug', destination: new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } }) }),
      config: {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        channels: { telegram: { dmPolicy: 'open' } }, gateway: { shutdownGraceMs: 0 }, agents: { defaults: { tools: { preset: 'none' } } },
      },
    });
  };
  const warmed = (lines: string[]) => lines.map((l) => JSON.parse(l) as { msg: string; chars?: number; replayed?: boolean; correlationId?: string })
    .filter((l) => l.msg === 'token counts warmed before the turn');

  it('a long message left in the journal by a stop is warmed before its replayed turn', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    fake.fallback = async () => { await held; return { content: 'late' }; };
    const first = new TestChannel('telegram');
    const firstLines: string[] = [];
    await start(first, firstLines);
    const text = `please read this: ${'lorem ipsum dolor sit amet '.repeat(40)}`;
    const submitted = await first.inject(text, { peerId: '7', id: 'long-1', deliveryId: 'update-7' });
    expect(submitted.status).toBe('accepted');
    await until(() => fake.requests.length === 1 || undefined, 'the held LLM call');
    expect(warmed(firstLines)).toMatchObject([{ chars: text.length, replayed: false, correlationId: submitted.correlationId }]);
    await gw!.stop();
    gw = undefined;
    release();

    fake.fallback = () => ({ content: 'answered after the restart' });
    const second = new TestChannel('telegram');
    const lines: string[] = [];
    await start(second, lines);
    await second.waitForSent(1);
    expect(second.texts()).toEqual(['answered after the restart']);
    expect(warmed(lines)).toMatchObject([{ chars: text.length, replayed: true, correlationId: submitted.correlationId }]);
  });
});
