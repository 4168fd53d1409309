import { appendFile, mkdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { loadConfig } from '../src/config/load.ts';
import { silentLogger } from '../src/core/logger.ts';
import type { InboundMessage } from '../src/core/message.ts';
import { startGateway, type RunningGateway } from '../src/main.ts';
import { nowMs, percentile, round } from './stats.ts';

/** Throughput and latency of one side at one level: medians over the paired rounds. */
export interface E2eSide {
  messagesPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Mean bytes of a request body the fake LLM received. */
  requestBytes: number;
  /** CPU time of this process per message (the fake LLM runs in its own): steadier than msg/s on a shared machine. */
  cpuUsPerMessage: number;
}

/** One concurrency level: gateway vs floor. */
export interface E2eLevel {
  concurrency: number;
  messages: number;
  rounds: number;
  floor: E2eSide;
  gateway: E2eSide;
  /** Median over the rounds of gateway throughput / floor throughput of the same round. */
  throughputRatio: number;
  /** Median over the rounds of floor CPU per message / gateway CPU per message of the same round. */
  cpuRatio: number;
  /** Load average (1 min) at the start and the end of the level. */
  loadAverage: [number, number];
  /** gateway p99 − floor p99 (ms, medians). */
  addedP99Ms: number;
  addedP50Ms: number;
}

/**
 * What the gateway's requests carry besides the conversation, taken from the gateway itself so that the floor
 * sends the same bytes: its system message, its tool schemas (the default `messaging` preset) and the
 * `[Runtime]` line at the head of each user message.
 */
export interface RequestShape {
  system: string;
  tools: OpenAI.Chat.Completions.ChatCompletionTool[];
  runtimeLine: string;
}

/** Sessions are replaced every this many messages so histories stay short and alike on both sides. */
const TURNS_PER_SESSION = 10;
const SYSTEM = 'You are a helpful assistant reached through a chat gateway.';

/**
 * `concurrency` workers, each sending its next message when the previous one is answered; with `thinkMs`, after
 * a pause drawn uniformly from 0 to twice that (spread arrivals: the workers do not move in lockstep).
 */
async function closedLoop(concurrency: number, total: number, send: (worker: number, i: number) => Promise<void>, thinkMs = 0): Promise<{ seconds: number; latencies: number[]; cpuUs: number }> {
  const latencies: number[] = [];
  const perWorker = Math.ceil(total / concurrency);
  const cpu = process.cpuUsage();
  const t0 = nowMs();
  await Promise.all(Array.from({ length: concurrency }, async (_, w) => {
    for (let i = 0; i < perWorker; i++) {
      if (thinkMs > 0) await new Promise((resolve) => setTimeout(resolve, Math.random() * 2 * thinkMs));
      const start = nowMs();
      await send(w, i);
      latencies.push(nowMs() - start);
    }
  }));
  const seconds = (nowMs() - t0) / 1000;
  const used = process.cpuUsage(cpu);
  return { seconds, latencies, cpuUs: (used.user + used.system) / latencies.length };
}

/**
 * The floor: the same openai client, the same fake server, history kept in memory, one JSONL append per
 * message, and the same request bytes as the gateway (its system message, tools and runtime lines).
 */
export async function floorRun(baseURL: string, dir: string, concurrency: number, total: number, tag: string, shape: RequestShape, thinkMs = 0) {
  const client = new OpenAI({ apiKey: 'sk-bench', baseURL, maxRetries: 2 });
  const histories = new Map<string, { role: 'user' | 'assistant'; content: string }[]>();
  await mkdir(dir, { recursive: true });
  return closedLoop(concurrency, total, async (w, i) => {
    const session = `${tag}-${w}-${Math.floor(i / TURNS_PER_SESSION)}`;
    const history = histories.get(session) ?? [];
    const text = `${shape.runtimeLine}\nmessage ${i} from worker ${w}`;
    const completion = await client.chat.completions.create({
      model: 'bench', messages: [{ role: 'system', content: shape.system }, ...history, { role: 'user', content: text }], max_completion_tokens: 4096,
      ...(shape.tools.length ? { tools: shape.tools } : {}), stream: false,
    });
    const answer = completion.choices[0]?.message.content ?? '';
    history.push({ role: 'user', content: text }, { role: 'assistant', content: answer });
    histories.set(session, history);
    await appendFile(path.join(dir, `${session}.jsonl`), `${JSON.stringify({ user: text, assistant: answer, at: new Date().toISOString() })}\n`);
  }, thinkMs);
}

/** What a gateway run takes from a checkout (this one, or another one that `bench/compare.ts` measures beside it). */
export interface GatewayImpl {
  loadConfig: typeof loadConfig;
  startGateway: typeof startGateway;
  silentLogger: typeof silentLogger;
}

const thisCheckout: GatewayImpl = { loadConfig, startGateway, silentLogger };

/**
 * The gateway: in-process channel → key → lane → runtime → openai provider → fake → transcript → reply, with
 * the default tool preset. `capture` receives the shape of its requests (the floor copies it).
 */
export async function gatewayRun(
  baseURL: string, dir: string, concurrency: number, total: number, tag: string, capture?: (shape: RequestShape) => void, impl: GatewayImpl = thisCheckout, thinkMs = 0,
) {
  const { loadConfig, startGateway, silentLogger } = impl;
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
    const run = await closedLoop(concurrency, total, async (w, i) => {
      const peer = `${tag}-${w}-${Math.floor(i / TURNS_PER_SESSION)}`;
      const message: InboundMessage = {
        id: `${peer}-${i}`, channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: peer, peerId: peer,
        sender: { id: peer, name: peer }, text: `message ${i} from worker ${w}`, attachments: [], mentionsBot: true, receivedAt: Date.now(),
      };
      const submission = await gw.gateway.sink(message);
      const result = await submission.done;
      if (result?.outcome !== 'replied') throw new Error(`turn ${result?.outcome}: ${result?.replies[0]?.text}`);
    }, thinkMs);
    if (capture) capture(await requestShape(gw));
    return run;
  } finally {
    await gw.stop();
  }
}

/** The shape of the next request of one of the gateway's sessions. */
async function requestShape(gw: RunningGateway): Promise<RequestShape> {
  const session = gw.sessions.activeSessions().next().value;
  if (!session) throw new Error('no session to take the request shape from');
  const { context, tools } = await gw.runtime.contextEngine.assemble(session);
  const user = context.messages.findLast((m) => m.role === 'user')?.content ?? '';
  return {
    system: context.messages[0]?.content ?? '',
    tools: tools.map((t) => ({ type: 'function' as const, function: t })),
    runtimeLine: user.slice(0, Math.max(0, user.indexOf('\n'))),
  };
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

export async function requestBytes(baseURL: string): Promise<number> {
  const stats = await (await fetch(new URL('/stats', baseURL))).json() as { requests: number; bytes: number };
  return stats.requests ? stats.bytes / stats.requests : 0;
}

/**
 * Measures end-to-end throughput and latency at each concurrency: after a warm-up of both, `rounds` adjacent
 * floor/gateway pairs (the order alternating), reported as medians; the ratio is the median of the pairs' ratios.
 */
export async function runE2eBench(options: { baseURL: string; dir: string; concurrencies: number[]; messages: (c: number) => number; rounds: number }): Promise<E2eLevel[]> {
  const levels: E2eLevel[] = [];
  for (const concurrency of options.concurrencies) {
    const total = options.messages(concurrency);
    const loadStart = os.loadavg()[0] as number;
    let shape: RequestShape | undefined;
    await gatewayRun(options.baseURL, path.join(options.dir, `warm-gw-${concurrency}`), concurrency, Math.min(total, 200), 'warm', (s) => { shape = s; });
    if (!shape) throw new Error('no request shape');
    const floorShape = shape;
    await floorRun(options.baseURL, path.join(options.dir, `warm-floor-${concurrency}`), concurrency, Math.min(total, 200), 'warm', floorShape);
    await requestBytes(options.baseURL);
    const floors: (E2eSide & { raw: number })[] = [];
    const gateways: (E2eSide & { raw: number })[] = [];
    const measure = async (side: 'floor' | 'gateway', index: number) => {
      const dir = path.join(options.dir, `${side}-${concurrency}-${index}`);
      const run = side === 'floor'
        ? await floorRun(options.baseURL, dir, concurrency, total, `f${index}`, floorShape)
        : await gatewayRun(options.baseURL, dir, concurrency, total, `g${index}`);
      const bytes = await requestBytes(options.baseURL);
      (side === 'floor' ? floors : gateways).push({
        raw: run.latencies.length / run.seconds, messagesPerSecond: round(run.latencies.length / run.seconds, 0),
        p50Ms: percentile(run.latencies, 50), p99Ms: percentile(run.latencies, 99), requestBytes: bytes, cpuUsPerMessage: run.cpuUs,
      });
      await rm(dir, { recursive: true, force: true });
    };
    for (let r = 0; r < options.rounds; r++) {
      const order: ('floor' | 'gateway')[] = r % 2 ? ['gateway', 'floor'] : ['floor', 'gateway'];
      for (const side of order) await measure(side, r);
    }
    const side = (runs: (E2eSide & { raw: number })[]): E2eSide => ({
      messagesPerSecond: round(median(runs.map((x) => x.raw)), 0), p50Ms: round(median(runs.map((x) => x.p50Ms)), 3),
      p99Ms: round(median(runs.map((x) => x.p99Ms)), 3), requestBytes: round(median(runs.map((x) => x.requestBytes)), 0),
      cpuUsPerMessage: round(median(runs.map((x) => x.cpuUsPerMessage)), 0),
    });
    const floor = side(floors);
    const gateway = side(gateways);
    levels.push({
      concurrency, messages: total, rounds: options.rounds, floor, gateway,
      throughputRatio: round(median(gateways.map((g, i) => g.raw / (floors[i] as { raw: number }).raw)), 3),
      cpuRatio: round(median(gateways.map((g, i) => (floors[i] as E2eSide).cpuUsPerMessage / g.cpuUsPerMessage)), 3),
      loadAverage: [round(loadStart, 2), round(os.loadavg()[0] as number, 2)],
      addedP99Ms: round(gateway.p99Ms - floor.p99Ms, 3),
      addedP50Ms: round(gateway.p50Ms - floor.p50Ms, 3),
    });
  }
  return levels;
}

/** Spread arrivals at one concurrency: CPU per message of each side (throughput is set by the pauses). */
export interface SpreadLevel {
  concurrency: number;
  thinkMs: number;
  messages: number;
  rounds: number;
  floorCpuUs: number;
  gatewayCpuUs: number;
  /** Median over the rounds of floor CPU per message / gateway CPU per message of the same round. */
  cpuRatio: number;
}

/**
 * The closed loop keeps a saturated gateway's turns in step (answers arrive together, so turns settle, save and
 * send together); with pauses between a worker's messages they do not, and CPU per message measures the
 * gateway's own work apart from that grouping. Paired rounds, alternating order, as {@link runE2eBench}.
 */
export async function runSpreadBench(options: { baseURL: string; dir: string; concurrency: number; thinkMs: number; messages: number; rounds: number }): Promise<SpreadLevel> {
  const { baseURL, concurrency, thinkMs, messages, rounds } = options;
  let shape: RequestShape | undefined;
  await gatewayRun(baseURL, path.join(options.dir, 'warm-gw'), concurrency, 200, 'warm', (s) => { shape = s; });
  if (!shape) throw new Error('no request shape');
  const floorShape = shape;
  const floors: number[] = [];
  const gateways: number[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const side of r % 2 ? ['gateway', 'floor'] : ['floor', 'gateway']) {
      const dir = path.join(options.dir, `${side}-${r}`);
      const run = side === 'floor'
        ? await floorRun(baseURL, dir, concurrency, messages, `sf${r}`, floorShape, thinkMs)
        : await gatewayRun(baseURL, dir, concurrency, messages, `sg${r}`, undefined, thisCheckout, thinkMs);
      (side === 'floor' ? floors : gateways).push(run.cpuUs);
      await rm(dir, { recursive: true, force: true });
    }
  }
  return {
    concurrency, thinkMs, messages, rounds, floorCpuUs: round(median(floors), 0), gatewayCpuUs: round(median(gateways), 0),
    cpuRatio: round(median(floors.map((f, i) => f / (gateways[i] as number))), 3),
  };
}
