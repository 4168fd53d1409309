// `node --expose-gc --import tsx bench/compare.ts <other checkout> [sessions=16] [rounds=7] [messages]`
// Measures this checkout's gateway beside another one (say a `git archive` of the commit before a change, with
// a node_modules link) and the floor, in one process against one fake LLM: each round runs the three in a
// rotating order, so that a load that comes and goes on a shared machine falls on all of them. Prints the
// medians of msg/s and of CPU µs per message (this process: the fake LLM runs in its own), and the medians of
// the per-round ratios. Asserts nothing.
import { mkdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startFakeLlmProcess } from './child.ts';
import { floorRun, gatewayRun, median, type GatewayImpl, type RequestShape } from './e2e-bench.ts';
import { round } from './stats.ts';

type Side = 'floor' | 'this' | 'other';

async function importFrom(checkout: string): Promise<GatewayImpl> {
  const load = (file: string) => import(pathToFileURL(path.join(checkout, file)).href) as Promise<Record<string, unknown>>;
  const [config, main, logger] = await Promise.all([load('src/config/load.ts'), load('src/main.ts'), load('src/core/logger.ts')]);
  return { loadConfig: config.loadConfig, startGateway: main.startGateway, silentLogger: logger.silentLogger } as GatewayImpl;
}

async function main(): Promise<void> {
  const [other, sessionsArg, roundsArg, messagesArg] = process.argv.slice(2);
  if (!other) throw new Error('usage: bench/compare.ts <other checkout> [sessions] [rounds] [messages]');
  const sessions = Number(sessionsArg ?? 16);
  const rounds = Number(roundsArg ?? 7);
  const total = Number(messagesArg ?? Math.max(3000, sessions * 20));
  const otherImpl = await importFrom(path.resolve(other));
  const work = path.join(os.tmpdir(), `switchboard-compare-${process.pid}`);
  await mkdir(work, { recursive: true });
  const llm = await startFakeLlmProcess();
  try {
    let shape: RequestShape | undefined;
    await gatewayRun(llm.baseURL, path.join(work, 'warm-this'), sessions, 300, 'warm', (s) => { shape = s; });
    await gatewayRun(llm.baseURL, path.join(work, 'warm-other'), sessions, 300, 'warm', undefined, otherImpl);
    if (!shape) throw new Error('no request shape');
    const floorShape = shape;
    await floorRun(llm.baseURL, path.join(work, 'warm-floor'), sessions, 300, 'warm', floorShape);
    const runs: Record<Side, { rate: number; cpuUs: number }[]> = { floor: [], this: [], other: [] };
    const sides: Side[] = ['floor', 'this', 'other'];
    for (let r = 0; r < rounds; r++) {
      const order = [...sides.slice(r % 3), ...sides.slice(0, r % 3)];
      for (const side of order) {
        const dir = path.join(work, `${side}-${r}`);
        (globalThis as { gc?: () => void }).gc?.();
        const cpu = process.cpuUsage();
        const run = side === 'floor'
          ? await floorRun(llm.baseURL, dir, sessions, total, `f${r}`, floorShape)
          : await gatewayRun(llm.baseURL, dir, sessions, total, `${side[0]}${r}`, undefined, side === 'other' ? otherImpl : undefined);
        const used = process.cpuUsage(cpu);
        runs[side].push({ rate: run.latencies.length / run.seconds, cpuUs: (used.user + used.system) / run.latencies.length });
        await rm(dir, { recursive: true, force: true });
      }
      process.stderr.write(`round ${r + 1}/${rounds}: ${sides.map((s) => `${s} ${round(runs[s][r]!.rate, 0)}/s ${round(runs[s][r]!.cpuUs, 0)} µs`).join(', ')}\n`);
    }
    const ratio = (a: Side, b: Side) => round(median(runs[a].map((x, i) => x.rate / runs[b][i]!.rate)), 3);
    const cpuRatio = (a: Side, b: Side) => round(median(runs[a].map((x, i) => x.cpuUs / runs[b][i]!.cpuUs)), 3);
    console.table(sides.map((s) => ({ side: s, 'msg/s': round(median(runs[s].map((x) => x.rate)), 0), 'CPU µs/msg': round(median(runs[s].map((x) => x.cpuUs)), 0) })));
    console.table([{
      sessions, messages: total, rounds, 'this/floor': ratio('this', 'floor'), 'other/floor': ratio('other', 'floor'), 'this/other': ratio('this', 'other'),
      'CPU this/other': cpuRatio('this', 'other'), 'load avg': os.loadavg().map((l) => round(l, 2)).join(' '),
    }]);
  } finally {
    await llm.stop();
    await rm(work, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (error: unknown) => {
  process.stderr.write(`compare failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
