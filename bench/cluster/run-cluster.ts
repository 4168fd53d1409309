// The cluster bench (the cluster design's "Benchmark"): `node --import tsx bench/cluster/run-cluster.ts`,
// or `npm run bench -- cluster` (BENCH_ONLY=cluster). Needs PostgreSQL:
//   SWITCHBOARD_BENCH_POSTGRES (else SWITCHBOARD_TEST_POSTGRES) = postgres://root@127.0.0.1:5432/test
//   BENCH_CLUSTER_SESSIONS (400), BENCH_CLUSTER_MESSAGES (2 per session), BENCH_CLUSTER_LLM_MS (1000,0),
//   BENCH_CLUSTER_REPLICAS (1,2,3), BENCH_CLUSTER_EMBEDDED (1; 0 leaves the embedded default out)
// Prints a table and writes bench/results/cluster.json.
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runClusterBench, type ClusterBenchRow } from './cluster-bench.ts';

/** What the machine could show: on 2 cores, only latency-bound scaling. */
export function coresNote(): string {
  const cores = os.cpus().length;
  return `${cores} CPU cores: every replica, PostgreSQL, the fake LLM and the driver share them, so CPU-bound work cannot scale with replicas here; `
    + 'the LLM-bound runs (1 s per call) show the scaling, the 0 ms runs the coordination overhead.';
}

/** Runs the cluster bench; resolves with its rows (undefined when no PostgreSQL is configured). */
export async function runClusterMain(options: { quick?: boolean; print?: (line: string) => void } = {}): Promise<{ rows: ClusterBenchRow[]; note: string; loadAverage: number[] } | undefined> {
  const print = options.print ?? ((line: string) => process.stdout.write(`${line}\n`));
  const adminUri = process.env.SWITCHBOARD_BENCH_POSTGRES ?? process.env.SWITCHBOARD_TEST_POSTGRES;
  if (!adminUri) {
    print('cluster bench skipped: set SWITCHBOARD_BENCH_POSTGRES=postgres://root@127.0.0.1:5432/test');
    return undefined;
  }
  const note = coresNote();
  print(`\nCluster bench. ${note}`);
  const rows = await runClusterBench({
    adminUri,
    sessions: Number(process.env.BENCH_CLUSTER_SESSIONS ?? (options.quick ? 100 : 400)),
    messagesPerSession: Number(process.env.BENCH_CLUSTER_MESSAGES ?? (options.quick ? 1 : 2)),
    llmLatencies: (process.env.BENCH_CLUSTER_LLM_MS ?? '1000,0').split(',').map(Number),
    replicaCounts: (process.env.BENCH_CLUSTER_REPLICAS ?? '1,2,3').split(',').map(Number), maxConcurrent: 8,
    embedded: process.env.BENCH_CLUSTER_EMBEDDED !== '0', log: print,
  });
  const loadAverage = os.loadavg().map((l) => Math.round(l * 10) / 10);
  print('\n5. Cluster mode: turns/s and accept→reply latency (maxConcurrent 8, Telegram webhooks spread over the replicas; speedup vs 1 replica of the same mode)');
  console.table(rows.map((r) => ({
    mode: r.mode, replicas: r.replicas, 'LLM ms': r.llmMs, sessions: r.sessions, turns: r.turns, 'turns/s': r.turnsPerSecond, speedup: r.speedup ?? '',
    'p50 ms': r.p50Ms, 'p99 ms': r.p99Ms, 'PG xact/turn': r.pgTransactionsPerTurn ?? '', 'PG statements/turn': r.statementsPerTurn ?? '',
  })));
  print(`${note} Load average at the end: ${loadAverage.join(' ')}. PG xact/turn: pg_stat_database.xact_commit+xact_rollback delta of the bench database / turns (autocommit statements count one each; heartbeats and polls during the run included). PG statements/turn: every Query and Execute message the replicas sent, counted by a proxy in front of PostgreSQL (pg_stat_statements needs shared_preload_libraries), / turns.`);
  return { rows, note, loadAverage };
}

const invokedDirectly = process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename);
if (invokedDirectly) {
  runClusterMain({ quick: process.env.BENCH_QUICK === '1' }).then(async (result) => {
    if (result) {
      const out = path.resolve(import.meta.dirname, '../results');
      await mkdir(out, { recursive: true });
      await writeFile(path.join(out, 'cluster.json'), `${JSON.stringify({ at: new Date().toISOString(), cpus: os.cpus().length, ...result }, null, 2)}\n`);
    }
    process.exit(0);
  }, (error: unknown) => {
    process.stderr.write(`cluster bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  });
}
