import { readFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import type { LedgerRecord } from '../../src/accounting/ledger-record.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type FakeReply } from '../fakes/fake-openai.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';

/** A gateway wired to a fake OpenAI server, in a temporary state folder. */
export interface ApiHarness {
  fake: FakeOpenAI;
  tmp: ReturnType<typeof tempDir>;
  gw: RunningGateway;
  /** The official client pointed at our /v1. */
  client: OpenAI;
  ledger(): LedgerRecord[];
  restart(): Promise<void>;
  close(): Promise<void>;
}

export async function startApiHarness(options: {
  config?: Record<string, unknown>;
  fallback?: (request: RecordedRequest) => FakeReply;
  apiKey?: string;
} = {}): Promise<ApiHarness> {
  const fake = await startFakeOpenAI(options.fallback);
  const tmp = tempDir();
  const env = { OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-upstream', OPENAI_MODEL: 'gpt-test' };
  const config = { providers: { default: { maxRetries: 0 } }, ...options.config };
  const start = () => startTestGateway({ dir: tmp.dir, env, config });
  const harness: ApiHarness = {
    fake, tmp,
    gw: await start(),
    client: undefined as unknown as OpenAI,
    ledger: () => {
      const file = path.join(tmp.dir, 'data', 'audit', 'turn-token-usage.jsonl');
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch {
        return [];
      }
      return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as LedgerRecord);
    },
    restart: async () => {
      await harness.gw.stop();
      harness.gw = await start();
      harness.client = clientFor(harness.gw, options.apiKey);
    },
    close: async () => {
      await harness.gw.stop();
      await fake.close();
      tmp.remove();
    },
  };
  harness.client = clientFor(harness.gw, options.apiKey);
  return harness;
}

function clientFor(gw: RunningGateway, apiKey = 'sk-anything'): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 10_000 });
}

/** Tokens of a ledger record, all four kinds. */
export const total = (r: LedgerRecord) => r.inputTokens + r.outputTokens + r.cacheReadTokens + r.cacheWriteTokens;
