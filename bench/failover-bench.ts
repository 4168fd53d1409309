// Failover (issue 32): what a provider that is down adds to a turn. The agent's provider answers 503 at once; its
// fallback answers (the same fake LLM, another path). Measured in-process against the fake in its own process:
// the turn that meets the failure, the turns after it (the failed key cooling down: the fallback is asked first),
// beside turns on the fallback alone.
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../src/config/load.ts';
import type { InboundMessage } from '../src/core/message.ts';
import { silentLogger } from '../src/core/logger.ts';
import { startGateway } from '../src/main.ts';
import { nowMs, percentile, round } from './stats.ts';

async function withGateway<T>(dir: string, providers: Record<string, unknown>, agent: Record<string, unknown>, work: (turn: (n: number) => Promise<number>) => Promise<T>): Promise<T> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const config = loadConfig({
    cwd: dir, env: {}, dotenv: false,
    overrides: { stateDir: path.join(dir, 'data'), logLevel: 'silent', providers, agents: { defaults: { workspace: path.join(dir, 'workspace'), ...agent } }, session: { dmScope: 'per-peer' } },
  });
  const gw = await startGateway({ config, listen: false, adapters: [], logger: silentLogger() });
  try {
    return await work(async (n) => {
      const peer = `p${n % 20}`;
      const message: InboundMessage = {
        id: `m${n}`, channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: peer, peerId: peer,
        sender: { id: peer, name: peer }, text: `message ${n}`, attachments: [], mentionsBot: true, receivedAt: Date.now(),
      };
      const t0 = nowMs();
      const result = await (await gw.gateway.sink(message)).done;
      if (result?.outcome !== 'replied') throw new Error(`turn ${result?.outcome}: ${result?.replies[0]?.text}`);
      return nowMs() - t0;
    });
  } finally {
    await gw.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * `rounds` fresh gateways per configuration; in each, the first turn (it meets the failure), then `turns` more.
 * `maxRetries` 0 on the failing provider shows the failover itself; the default (2) adds the SDK's own retries
 * with their backoff before the failover.
 */
export async function runFailoverBench(options: { baseURL: string; dir: string; rounds: number; turns: number }) {
  const down = options.baseURL.replace(/\/v1$/, '/down/v1');
  const backup = { kind: 'openai', baseUrl: options.baseURL, apiKey: 'sk-bench', model: 'bench' };
  const measure = async (maxRetries: number | undefined | 'none') => {
    const first: number[] = [];
    const after: number[] = [];
    for (let r = 0; r < options.rounds; r++) {
      const primary = { kind: 'openai', baseUrl: down, apiKey: 'sk-bench', model: 'bench', ...(typeof maxRetries === 'number' ? { maxRetries } : {}) };
      // 'none': the fallback alone, its first turn on a fresh gateway too (a first call opens its connection).
      const [providers, agent] = maxRetries === 'none' ? [{ backup }, { provider: 'backup' }] : [{ primary, backup }, { provider: 'primary', fallbacks: ['backup/bench'] }];
      await withGateway(path.join(options.dir, `failover-${maxRetries ?? 'default'}-${r}`), providers, agent, async (turn) => {
        first.push(await turn(0));
        for (let n = 1; n <= options.turns; n++) after.push(await turn(n));
      });
    }
    return { first: percentile(first, 50), after: percentile(after, 50) };
  };
  const alone = await measure('none');
  const bare = await measure(0);
  const retried = await measure(undefined);
  return {
    rounds: options.rounds, turns: options.turns, fallbackFirstMs: round(alone.first, 1), fallbackOnlyMs: round(alone.after, 2),
    firstFailedMs: round(bare.first, 1), addedByFailureMs: round(bare.first - alone.first, 1),
    whileCoolingMs: round(bare.after, 2), addedWhileCoolingMs: round(bare.after - alone.after, 2),
    firstFailedWithRetriesMs: round(retried.first, 1), addedWithRetriesMs: round(retried.first - alone.first, 1),
  };
}
