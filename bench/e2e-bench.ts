import { appendFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import OpenAI from 'openai';
import { loadConfig } from '../src/config/load.ts';
import { silentLogger } from '../src/core/logger.ts';
import type { InboundMessage } from '../src/core/message.ts';
import { startGateway } from '../src/main.ts';
import { mean, nowMs, percentile, round } from './stats.ts';

/** One concurrency level: gateway vs floor. */
export interface E2eLevel {
  concurrency: number;
  messages: number;
  floor: { messagesPerSecond: number; p50Ms: number; p99Ms: number };
  gateway: { messagesPerSecond: number; p50Ms: number; p99Ms: number };
  /** gateway throughput / floor throughput. */
  throughputRatio: number;
  /** gateway p99 − floor p99 (ms). */
  addedP99Ms: number;
  addedP50Ms: number;
}

/** Sessions are replaced every this many messages so histories stay short and alike on both sides. */
const TURNS_PER_SESSION = 10;
const SYSTEM = 'You are a helpful assistant reached through a chat gateway.';

async function closedLoop(concurrency: number, total: number, send: (worker: number, i: number) => Promise<void>): Promise<{ seconds: number; latencies: number[] }> {
  const latencies: number[] = [];
  const perWorker = Math.ceil(total / concurrency);
  const t0 = nowMs();
  await Promise.all(Array.from({ length: concurrency }, async (_, w) => {
    for (let i = 0; i < perWorker; i++) {
      const start = nowMs();
      await send(w, i);
      latencies.push(nowMs() - start);
    }
  }));
  return { seconds: (nowMs() - t0) / 1000, latencies };
}

/** The floor: the same openai client, the same fake server, history kept in memory, one JSONL append per message. */
async function floorRun(baseURL: string, dir: string, concurrency: number, total: number, tag: string) {
  const client = new OpenAI({ apiKey: 'sk-bench', baseURL, maxRetries: 2 });
  const histories = new Map<string, { role: 'user' | 'assistant'; content: string }[]>();
  await mkdir(dir, { recursive: true });
  return closedLoop(concurrency, total, async (w, i) => {
    const session = `${tag}-${w}-${Math.floor(i / TURNS_PER_SESSION)}`;
    const history = histories.get(session) ?? [];
    const text = `message ${i} from worker ${w}`;
    const completion = await client.chat.completions.create({ model: 'bench', messages: [{ role: 'system', content: SYSTEM }, ...history, { role: 'user', content: text }], max_completion_tokens: 4096 });
    const answer = completion.choices[0]?.message.content ?? '';
    history.push({ role: 'user', content: text }, { role: 'assistant', content: answer });
    histories.set(session, history);
    await appendFile(path.join(dir, `${session}.jsonl`), `${JSON.stringify({ user: text, assistant: answer, at: new Date().toISOString() })}\n`);
  });
}

/** The gateway: in-process channel → key → lane → runtime → openai provider → fake → transcript → reply. */
async function gatewayRun(baseURL: string, dir: string, concurrency: number, total: number, tag: string) {
  const config = loadConfig({
    cwd: dir, env: {}, dotenv: false,
    overrides: {
      stateDir: path.join(dir, 'data'), logLevel: 'silent',
      providers: { default: { kind: 'openai', baseUrl: baseURL, apiKey: 'sk-bench', model: 'bench' } },
      agents: { defaults: { maxConcurrent: concurrency, workspace: path.join(dir, 'workspace'), systemPrompt: SYSTEM } },
      session: { dmScope: 'per-peer', maxActiveSessions: 100_000 },
    },
  });
  const gw = await startGateway({ config, listen: false, adapters: [], logger: silentLogger() });
  try {
    return await closedLoop(concurrency, total, async (w, i) => {
      const peer = `${tag}-${w}-${Math.floor(i / TURNS_PER_SESSION)}`;
      const message: InboundMessage = {
        id: `${peer}-${i}`, channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: peer, peerId: peer,
        sender: { id: peer, name: peer }, text: `message ${i} from worker ${w}`, attachments: [], mentionsBot: true, receivedAt: Date.now(),
      };
      const submission = await gw.gateway.sink(message);
      const result = await submission.done;
      if (result?.outcome !== 'replied') throw new Error(`turn ${result?.outcome}: ${result?.replies[0]?.text}`);
    });
  } finally {
    await gw.stop();
  }
}

const summarize = (run: { seconds: number; latencies: number[] }, total: number) => ({
  messagesPerSecond: round(run.latencies.length / run.seconds, 0),
  p50Ms: round(percentile(run.latencies, 50), 3),
  p99Ms: round(percentile(run.latencies, 99), 3),
  meanMs: round(mean(run.latencies), 3),
  messages: total,
});

/** Measures end-to-end throughput and latency at each concurrency, floor and gateway alternating. */
export async function runE2eBench(options: { baseURL: string; dir: string; concurrencies: number[]; messages: (c: number) => number }): Promise<E2eLevel[]> {
  const levels: E2eLevel[] = [];
  for (const concurrency of options.concurrencies) {
    const total = options.messages(concurrency);
    // Warm both paths (JIT, keep-alive sockets), then measure floor, gateway, floor, gateway and keep the better of each.
    await floorRun(options.baseURL, path.join(options.dir, `warm-floor-${concurrency}`), concurrency, Math.min(total, 200), 'warm');
    await gatewayRun(options.baseURL, path.join(options.dir, `warm-gw-${concurrency}`), concurrency, Math.min(total, 200), 'warm');
    const floors = [];
    const gateways = [];
    for (let round = 0; round < 2; round++) {
      floors.push(summarize(await floorRun(options.baseURL, path.join(options.dir, `floor-${concurrency}-${round}`), concurrency, total, `f${round}`), total));
      gateways.push(summarize(await gatewayRun(options.baseURL, path.join(options.dir, `gw-${concurrency}-${round}`), concurrency, total, `g${round}`), total));
    }
    const best = <T extends { messagesPerSecond: number }>(runs: T[]) => runs.reduce((a, b) => (b.messagesPerSecond > a.messagesPerSecond ? b : a));
    const floor = best(floors);
    const gateway = best(gateways);
    levels.push({
      concurrency, messages: total,
      floor: { messagesPerSecond: floor.messagesPerSecond, p50Ms: floor.p50Ms, p99Ms: floor.p99Ms },
      gateway: { messagesPerSecond: gateway.messagesPerSecond, p50Ms: gateway.p50Ms, p99Ms: gateway.p99Ms },
      throughputRatio: round(gateway.messagesPerSecond / floor.messagesPerSecond, 3),
      addedP99Ms: round(gateway.p99Ms - floor.p99Ms, 3),
      addedP50Ms: round(gateway.p50Ms - floor.p50Ms, 3),
    });
  }
  return levels;
}
