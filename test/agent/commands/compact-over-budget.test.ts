import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/core/clock.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../../src/main.ts';
import { testConfig } from '../../helpers/gateway.ts';
import { gatewayHttp } from '../../helpers/gateway-http.ts';
import { useTempDir, useFakeOpenAI } from '../../helpers/fixtures.ts';

/** `/compact` refused by the session token budget (SPEC §14) answers with the budget line alone. */
describe('/compact over the session budget', () => {
  const fake = useFakeOpenAI(() => ({ content: 'fine', usage: { prompt_tokens: 300, completion_tokens: 100 } }));
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const http = gatewayHttp(() => gw!.url!);

  it('answers with the budget line, not "Compaction failed ... try /compact again later"', async () => {
    gw = await startGateway({
      config: testConfig(tmp.dir, {
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0, maxTokens: 20 } },
        session: { dmScope: 'per-peer', reset: { mode: 'off' }, tokenBudget: 1000 },
        agents: { defaults: { tools: { preset: 'none' }, compaction: { keepRecentTokens: 1 } } },
      }),
      logger: silentLogger(), clock: new ManualClock('2026-06-01T10:00:00Z'),
    });
    expect(await http.say('alice', 'one')).toBe('fine');
    expect(await http.say('alice', 'two')).toBe('fine');
    expect(await http.say('alice', '/compact')).toMatch(
      /^This conversation has used 800 of its 1,000-token budget, and the next request alone needs about \d+ more, so I did not send it\. Start a new session with \/new, or ask the owner to raise the budget \(session\.tokenBudget\)\.$/,
    );
    expect(fake.requests).toHaveLength(2);
  });
});
