import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { createLogger, silentLogger } from '../../src/core/logger.ts';
import { PromptPrediction } from '../../src/agent/context/token-calibration.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { testConfig } from '../helpers/gateway.ts';
import { gatewayHttp } from '../helpers/gateway-http.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

/**
 * SPEC §14 with a provider that reports usage far from our count (which calibration ignores as implausible): the
 * budget predicts a session's later calls from what the provider last reported for it, plus what was added since.
 * The default tool preset ("messaging") is used, so the fixed prompt (system, bootstrap, tool schemas) is several
 * hundred tokens by our count while the provider reports 40.
 */
describe('the session budget predicts from the reported usage', () => {
  const fake = useFakeOpenAI();
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const start = async (tokenBudget: number, lines?: string[]) => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        session: { dmScope: 'per-peer', reset: { mode: 'off' }, tokenBudget },
      }),
      logger: lines ? createLogger({ level: 'warn', destination: new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } }) }) : silentLogger(),
      clock: new ManualClock('2026-06-01T10:00:00Z'),
    });
  };
  const http = gatewayHttp(() => gw!.url!);

  it('40 prompt + 600 completion per call, budget 2,605: turns one to four are sent, the fifth is refused (2,560 used, 45 left, under the last reported 40 plus what was added)', async () => {
    fake.fallback = () => ({ content: 'fine', usage: { prompt_tokens: 40, completion_tokens: 600 } });
    await start(2605);
    for (const text of ['one', 'two', 'three', 'four']) expect(await http.say('alice', text)).toBe('fine');
    expect(fake.requests).toHaveLength(4);
    expect((await http.entry('agent:main:direct:alice')).tokenBudget).toEqual({ used: 2560, budget: 2605 });
    expect(await http.say('alice', 'five')).toMatch(/^This conversation has used 2,560 of its 2,605-token budget, and the next request alone needs about \d+ more, so I did not send it\./);
    expect(fake.requests).toHaveLength(4);
  });

  it('a budget below the fixed prompt cost is warned about at start and in /status, and the first message is refused unsent', async () => {
    fake.fallback = () => ({ content: 'fine', usage: { prompt_tokens: 40, completion_tokens: 10 } });
    const lines: string[] = [];
    await start(300, lines);
    const warnings = lines.map((l) => (JSON.parse(l) as { msg: string }).msg).filter((m) => m.startsWith('session.tokenBudget (300) is below'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^session\.tokenBudget \(300\) is below what every request of agent main costs before any message \(about [\d,]+ tokens: system prompt, bootstrap files and tool schemas\), so every first message is refused: raise it, or choose a smaller tools preset\.$/);
    expect(await http.say('alice', 'hello')).toMatch(/^This conversation has used 0 of its 300-token budget/);
    expect(fake.requests).toHaveLength(0);
    expect(await http.say('alice', '/status')).toContain('• ⚠ session.tokenBudget (300) is below what every request of agent main costs before any message');
  });

  it('a budget above the fixed prompt cost is not warned about', async () => {
    const lines: string[] = [];
    await start(100_000, lines);
    expect(lines.filter((l) => l.includes('tokenBudget'))).toEqual([]);
    expect(await http.say('alice', '/status')).not.toContain('⚠');
  });
});

describe('PromptPrediction', () => {
  const session = { key: 'agent:main:direct:alice', sessionId: 's1', compactionCount: 0 };

  it('predicts the last reported prompt plus what our count says was added; the calibrated estimate before any report', () => {
    const prediction = new PromptPrediction();
    expect(prediction.predict(session, 900, 905)).toBe(905);
    prediction.record(session, 40, 900);
    expect(prediction.predict(session, 930, 935)).toBe(70);
  });

  it('a reset, a compaction or a report of 0 leaves the calibrated estimate', () => {
    const prediction = new PromptPrediction();
    prediction.record(session, 40, 900);
    expect(prediction.predict({ ...session, sessionId: 's2' }, 930, 935)).toBe(935);
    expect(prediction.predict({ ...session, compactionCount: 1 }, 930, 935)).toBe(935);
    const other = { ...session, key: 'agent:main:direct:bob' };
    prediction.record(other, 0, 900);
    expect(prediction.predict(other, 930, 935)).toBe(935);
  });

  it('keeps the 10,000 most recently called sessions', () => {
    const prediction = new PromptPrediction();
    prediction.record(session, 40, 900);
    for (let i = 0; i < 9_999; i++) prediction.record({ key: `agent:main:api:direct:oneoff-${i}`, sessionId: `o${i}`, compactionCount: 0 }, 10, 100);
    expect(prediction.predict(session, 900, 905)).toBe(40);
    prediction.record({ key: 'agent:main:api:direct:one-more', sessionId: 'x', compactionCount: 0 }, 10, 100);
    expect(prediction.predict(session, 900, 905)).toBe(905);
  });
});
