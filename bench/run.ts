// `npm run bench`: measures the gateway against the floor of this machine, each figure beside a baseline
// measured in the same run. Prints a table and writes bench/results/latest.json. Asserts nothing.
//   BENCH_QUICK=1         smaller sizes (a quick look, not the reported figures)
//   BENCH_SESSIONS=16     only these end-to-end levels (default 1,16,256)
//   BENCH_ONLY=e2e,store  run only some parts (e2e, tools, mcp, delivery, streaming, media, jobs, failover, store, startup, ledger, memory, context, cluster);
//                         `npm run bench -- cluster` names them on the command line
// Memory runs first, while the process heap holds nothing else.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startFakeLlmProcess } from './child.ts';
import { runE2eBench, runSpreadBench } from './e2e-bench.ts';
import { runMemoryBench } from './memory-bench.ts';
import { runStartupBench } from './startup-bench.ts';
import { runLedgerBench } from './ledger-bench.ts';
import { runStoreBench } from './store-bench.ts';
import { runToolBench } from './tool-bench.ts';
import { runMcpBench } from './mcp-bench.ts';
import { runDeliveryBench } from './delivery-bench.ts';
import { runMediaBench } from './media-bench.ts';
import { runJobsBench } from './jobs-bench.ts';
import { runFailoverBench } from './failover-bench.ts';
import { runStreamingBench } from './streaming-bench.ts';

const quick = process.env.BENCH_QUICK === '1';
/** BENCH_SESSIONS=16 (or 1,16): only some of the end-to-end levels. */
const sessionLevels = (process.env.BENCH_SESSIONS ?? '1,16,256').split(',').map(Number);
// `npm run bench -- cluster` (or BENCH_ONLY=cluster): parts named on the command line. The cluster part needs
// PostgreSQL (SWITCHBOARD_BENCH_POSTGRES or SWITCHBOARD_TEST_POSTGRES) and some 8 minutes; it is not in the default list.
const only = new Set((process.argv[2] ?? process.env.BENCH_ONLY ?? 'e2e,tools,mcp,delivery,streaming,media,jobs,failover,store,startup,ledger,memory,context').split(',').map((s) => s.trim()));
const root = path.resolve(import.meta.dirname, '..');
const work = path.join(os.tmpdir(), `switchboard-bench-${process.pid}`);

function table(title: string, rows: Record<string, unknown>[]): void {
  if (!rows.length) return;
  process.stdout.write(`\n${title}\n`);
  console.table(rows);
}

async function main(): Promise<void> {
  await mkdir(work, { recursive: true });
  const results: Record<string, unknown> = {
    at: new Date().toISOString(), node: process.version, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, quick,
  };
  try {
    if (only.has('memory')) {
      const memory = await runMemoryBench({ dir: work, count: 10_000 });
      results.memory = memory;
      table('3b. Memory per idle active session (10k admitted)', [{ 'RSS bytes/session': memory.rssBytesPerSession, 'heap bytes/session': memory.heapBytesPerSession, 'entry JSON bytes': memory.entryJsonBytes, 'heap/JSON': memory.heapToJsonRatio, 'gc exposed': memory.gcExposed }]);
    }
    if (only.has('e2e')) {
      const llm = await startFakeLlmProcess();
      try {
        const e2e = await runE2eBench({
          baseURL: llm.baseURL, dir: path.join(work, 'e2e'), concurrencies: sessionLevels,
          messages: (c) => (quick ? Math.max(300, c * 4) : Math.max(3000, c * 20)), rounds: quick ? 3 : 5,
        });
        results.e2e = e2e;
        table('1. End to end (gateway vs floor: same openai client, same request bytes, one JSONL append per message; medians of paired rounds)', e2e.map((l) => ({
          sessions: l.concurrency, messages: l.messages, rounds: l.rounds, 'floor msg/s': l.floor.messagesPerSecond, 'gateway msg/s': l.gateway.messagesPerSecond,
          'gateway/floor': l.throughputRatio, 'floor p50 ms': l.floor.p50Ms, 'gw p50 ms': l.gateway.p50Ms, 'floor p99 ms': l.floor.p99Ms, 'gw p99 ms': l.gateway.p99Ms, 'added p99 ms': l.addedP99Ms,
          'floor req B': l.floor.requestBytes, 'gw req B': l.gateway.requestBytes,
          'floor CPU µs': l.floor.cpuUsPerMessage, 'gw CPU µs': l.gateway.cpuUsPerMessage, 'floor/gw CPU': l.cpuRatio, 'load avg': l.loadAverage.join(' → '),
        })));
        const spread = await runSpreadBench({ baseURL: llm.baseURL, dir: path.join(work, 'spread'), concurrency: 16, thinkMs: 20, messages: quick ? 600 : 2000, rounds: quick ? 3 : 5 });
        results.spread = spread;
        table('1a. Spread arrivals: 16 sessions, a pause of 0–40 ms before each message (turns not in step); CPU per message', [{
          sessions: spread.concurrency, 'mean pause ms': spread.thinkMs, messages: spread.messages, rounds: spread.rounds,
          'floor CPU µs': spread.floorCpuUs, 'gw CPU µs': spread.gatewayCpuUs, 'floor/gw CPU': spread.cpuRatio,
        }]);
      } finally {
        await llm.stop();
      }
    }
    if (only.has('tools')) {
      const llm = await startFakeLlmProcess();
      try {
        const tools = await runToolBench({ baseURL: llm.baseURL, dir: path.join(work, 'tools'), concurrencies: [1, 16], messages: quick ? 100 : 500, rounds: 5 });
        results.tools = tools;
        table('1b. Tool loop: µs per LLM call of a 5-round no-op tool run (gateway vs the same client doing the rounds bare)', tools.levels.map((l) => ({
          sessions: l.concurrency, messages: l.messages, 'calls/message': l.callsPerMessage, 'floor µs/call': l.floorUsPerIteration, 'gateway µs/call': l.gatewayUsPerIteration, 'floor/gateway': l.ratio, 'added µs/call': l.addedUsPerIteration,
        })));
        table('1c. Tool schema tokens per request, by preset', [tools.schemaTokensByPreset]);
      } finally {
        await llm.stop();
      }
    }
    if (only.has('mcp')) {
      const mcp = await runMcpBench({ dir: path.join(work, 'mcp'), calls: quick ? 200 : 1000 });
      results.mcp = mcp;
      table('1d. MCP: start-up with 3 stdio servers vs none (they connect in the background), and one no-op call through the gateway vs the SDK client alone', [mcp]);
    }
    if (only.has('delivery')) {
      const delivery = await runDeliveryBench({ messages: quick ? 300 : 2000, users: quick ? 30 : 200 });
      results.delivery = delivery;
      table('1e. Delivery with one Bot API send in three cut before it is read (lost and duplicated must be 0)', [{ ...delivery }]);
    }
    if (only.has('media')) {
      const llm = await startFakeLlmProcess();
      try {
        const media = await runMediaBench({ baseURL: llm.baseURL, dir: path.join(work, 'media'), sessions: 16, messages: quick ? 16 : 64, rounds: quick ? 1 : 3 });
        results.media = media;
        table(`1f. Media: a ${(media.jpegBytes / 1e6).toFixed(1)} MB JPEG per message (fetchMedia → store → sharp → gpt-4o), 16 sessions, vs text only; stalls: worst over the rounds (target ≤ ${media.stallTargetMs} ms), beside an idle process's (the machine's share)`, [media.text, media.media].map((s, i) => ({
          run: i ? 'photo' : 'text', messages: s.messages, 'msg/s': s.messagesPerSecond, 'CPU µs/msg': s.cpuUsPerMessage, 'added CPU µs/image': i ? media.addedCpuUsPerImage : '',
          'stall max ms': s.stallMaxMs, 'stall p99 ms': s.stallP99Ms, 'idle proc. max ms': s.idleStallMaxMs, 'idle proc. p99 ms': s.idleStallP99Ms, 'req B': s.requestBytes, 'load avg': media.loadAverage.join(' → '),
        })));
      } finally {
        await llm.stop();
      }
    }
    if (only.has('store')) {
      const store = await runStoreBench({ dir: work, sizes: quick ? [100, 10_000] : [100, 10_000, 100_000, 1_000_000], turns: quick ? 500 : 2000 });
      results.store = store;
      table('2. Per-turn persistence (entry update + transcript append) vs raw SQLite upsert + JSONL append', store.map((l) => ({
        'stored sessions': l.storedSessions, 'gateway µs': l.gateway.meanUs, 'gateway p99 µs': l.gateway.p99Us, 'raw µs': l.raw.meanUs, 'raw p99 µs': l.raw.p99Us, 'gateway/raw': l.ratio, 'populate s': l.populateSeconds,
      })));
    }
    if (only.has('startup')) {
      const startup = await runStartupBench({ dir: work, stored: quick ? 10_000 : 100_000, runs: quick ? 2 : 5 });
      results.startup = startup;
      table('3a. Start-up: spawn → /healthz answering (compiled build; from source through tsx for comparison; with files in data/media)', [{ 'stored sessions': startup.storedSessions, 'empty ms': startup.emptyMs, 'with sessions ms': startup.withSessionsMs, ratio: startup.ratio, 'from source ms': startup.fromSourceWithSessionsMs, 'media files': startup.mediaFiles, 'with media ms': startup.withMediaMs, 'media ratio': startup.mediaRatio }]);
    }
    if (only.has('streaming')) {
      const streaming = await runStreamingBench({ answers: quick ? 5 : 20, chars: 4000, deltaChars: 12, deltaMs: 30 });
      results.streaming = streaming;
      table('2c. Streaming edits: a 4,000-character Markdown answer in 12-character deltas every 30 ms, the default cadence (one edit a second per chat); CPU per post or edit (the whole text rendered again)', streaming.map((r) => ({
        channel: r.channel, 'stream s': r.streamSeconds, 'posts/answer': r.postsPerAnswer, 'edits/answer': r.editsPerAnswer, 'CPU µs per call': r.cpuUsPerCall, 'CPU ms per answer': r.cpuMsPerAnswer,
      })));
    }
    if (only.has('jobs')) {
      const jobs = await runJobsBench({ dir: work, count: quick ? 2000 : 10_000, minutes: quick ? 5 : 20 });
      results.jobs = jobs;
      table('2d. Scheduled jobs: a due time with many jobs in the SQLite store (hourly jobs spread over the minutes; the intake takes each run at once)', [{
        jobs: jobs.jobs, 'start ms': jobs.startMs, 'start CPU ms': jobs.startCpuMs, 'due times': jobs.dueTimes, 'runs per due time': jobs.runsPerDueTime,
        'due time ms': jobs.dueTimeMs, 'due time CPU ms': jobs.dueTimeCpuMs, 'µs per run': jobs.perRunUs,
      }]);
    }
    if (only.has('failover')) {
      const llm = await startFakeLlmProcess();
      try {
        const failover = await runFailoverBench({ baseURL: llm.baseURL, dir: work, rounds: quick ? 3 : 5, turns: quick ? 50 : 200 });
        results.failover = failover;
        table('2e. Failover: the agent\'s provider answers 503, its fallback answers (ms per turn, medians; the fallback alone beside)', [{
          'fallback alone: first turn ms': failover.fallbackFirstMs, 'later turns ms': failover.fallbackOnlyMs, 'failed turn (first) ms': failover.firstFailedMs, 'added ms': failover.addedByFailureMs,
          'turns after (cooling) ms': failover.whileCoolingMs, 'added after ms': failover.addedWhileCoolingMs,
          'failed turn, SDK retries (default 2) ms': failover.firstFailedWithRetriesMs, 'added with retries ms': failover.addedWithRetriesMs,
        }]);
      } finally {
        await llm.stop();
      }
    }
    if (only.has('ledger')) {
      const ledger = await runLedgerBench({ dir: work, records: quick ? 30_000 : 300_000, runs: quick ? 2 : 5 });
      results.ledger = ledger;
      table('3c. Start-up with a token ledger: spawn → /healthz (compiled), empty vs the ledger (snapshot since the first start), and reads once running', [{
        records: ledger.records, 'ledger MB': ledger.ledgerMB, 'empty ms': ledger.emptyMs, 'with ledger ms': ledger.withLedgerMs, ratio: ledger.ratio,
        'first start ms': ledger.firstStartMs, 'first /usage wait ms': ledger.firstUsageWaitMs, 'first common timeline ms': ledger.firstCommonTimelineMs,
        '/usage ms': ledger.usageMs, 'rare key timeline ms': ledger.rareTimelineMs, 'common key timeline ms': ledger.commonTimelineMs,
      }]);
    }
    if (only.has('cluster')) {
      const { runClusterMain } = await import('./cluster/run-cluster.ts');
      const cluster = await runClusterMain({ quick });
      if (cluster) results.cluster = cluster;
    }
    if (only.has('context')) {
      const context = await import('./context-bench.ts').then((m: { runContextBench?: (o?: { quick?: boolean }) => Promise<Record<string, unknown>> }) => m.runContextBench?.({ quick }), () => undefined);
      if (context) {
        results.context = context;
        process.stdout.write(`\n4. Tokenizer and context\n${JSON.stringify(context, null, 2)}\n`);
      }
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  await mkdir(path.join(root, 'bench/results'), { recursive: true });
  await writeFile(path.join(root, 'bench/results/latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write('\nWritten to bench/results/latest.json\n');
}

main().then(() => process.exit(0), (error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
