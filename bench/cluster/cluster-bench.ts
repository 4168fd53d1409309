import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { SECRET_HEADER, webhookPath } from '../../channels/telegram/webhook-route.ts';
import { startRecordingLlm } from '../../test/cluster/chaos/recording-llm.ts';
import { ReplicaSet } from '../../test/cluster/chaos/replica-processes.ts';
import { percentile, round } from '../stats.ts';
import { startFakeBotApi } from './fake-bot-api.ts';
import { StatementCounter } from './statement-counter.ts';

/** One measured configuration. */
export interface ClusterBenchRow {
  mode: 'cluster' | 'embedded';
  replicas: number;
  llmMs: number;
  sessions: number;
  turns: number;
  turnsPerSecond: number;
  /** Accept (the webhook's 200) → reply (the fake Bot API's sendMessage), ms. */
  p50Ms: number;
  p99Ms: number;
  /** PostgreSQL transactions per turn (pg_stat_database.xact_commit delta, heartbeats and polls included). */
  pgTransactionsPerTurn?: number;
  /** Statements per turn, counted by a proxy in front of PostgreSQL (every connection of every replica, heartbeats and polls included). */
  statementsPerTurn?: number;
  /** The statements of the measured run most often sent, with their count per turn. */
  topStatements?: { sql: string; perTurn: number }[];
  /** Throughput relative to 1 replica of the same mode and LLM latency. */
  speedup?: number;
}

/** Options of {@link runClusterBench}. */
export interface ClusterBenchOptions {
  /** The PostgreSQL server (a user that may create databases); each configuration gets a fresh database. */
  adminUri: string;
  sessions: number;
  messagesPerSession: number;
  maxConcurrent: number;
  replicaCounts: number[];
  llmLatencies: number[];
  /** Also measure the embedded default (SQLite, one process) at each latency. */
  embedded: boolean;
  log?: (line: string) => void;
}

const SECRET = 'bench-secret';
/** Update ids are never reused within a process: the gateway drops a repeated one as a redelivery. */
let nextUpdateId = 1;
const CHAT_BASE = 800_000;

async function admin(adminUri: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUri });
  await client.connect();
  try { await client.query(sql); } finally { await client.end(); }
}

async function transactions(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: string }>('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()');
  return Number(rows[0]?.n ?? 0);
}

/**
 * Every session sends its messages one after another, each after the previous reply (a person waiting for the
 * answer), through Telegram webhooks spread over the replicas; a refused or failed delivery is sent again.
 */
async function drive(urls: string[], sessions: number, messages: number, tag: string, waitReply: (chat: number, text: string) => Promise<number>): Promise<{ latencies: number[]; seconds: number }> {
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: sessions }, async (_, s) => {
    const chat = CHAT_BASE + s;
    for (let i = 0; i < messages; i++) {
      const text = `${tag} c${s} m${i}`;
      const replied = waitReply(chat, `re: ${text}`);
      const body = JSON.stringify({ update_id: nextUpdateId++, message: { message_id: i + 1, date: Math.floor(Date.now() / 1000), chat: { id: chat, type: 'private', first_name: `B${s}` }, from: { id: chat, is_bot: false, first_name: `B${s}` }, text } });
      let acceptedAt = 0;
      for (let attempt = 0; !acceptedAt; attempt++) {
        const url = urls[(s + attempt) % urls.length]!;
        const response = await fetch(`${url}${webhookPath('default')}`, { method: 'POST', body, headers: { 'content-type': 'application/json', [SECRET_HEADER]: SECRET } }).catch(() => undefined);
        await response?.arrayBuffer();
        if (response?.status === 200) acceptedAt = performance.now();
        else if (attempt > 20) throw new Error(`webhook refused: ${response?.status ?? 'no connection'}`);
      }
      latencies.push((await replied) - acceptedAt);
    }
  }));
  return { latencies, seconds: (performance.now() - t0) / 1000 };
}

/** One configuration: fresh database, replicas, the LLM at `llmMs`, a warm-up, then the measured load. */
async function measure(options: ClusterBenchOptions, mode: 'cluster' | 'embedded', replicas: number, llmMs: number): Promise<ClusterBenchRow> {
  const name = `sb_bench_${randomBytes(5).toString('hex')}`;
  const url = new URL(options.adminUri);
  url.pathname = `/${name}`;
  if (mode === 'cluster') await admin(options.adminUri, `CREATE DATABASE ${name}`);
  const pool = mode === 'cluster' ? new pg.Pool({ connectionString: url.toString(), max: 1 }) : undefined;
  const counter = mode === 'cluster' ? await StatementCounter.start(url.toString()) : undefined;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-cluster-bench-'));
  const llm = await startRecordingLlm(() => llmMs);
  const botApi = await startFakeBotApi();
  const waiting = new Map<string, (at: number) => void>();
  botApi.onSend = (_chat, text) => {
    const resolve = waiting.get(text);
    waiting.delete(text);
    resolve?.(performance.now());
  };
  const waitReply = (_chat: number, text: string) => new Promise<number>((resolve) => waiting.set(text, resolve));
  const set = new ReplicaSet(dir, {
    store: counter ? counter.uri(url.toString()) : undefined, llmBaseURL: llm.baseURL,
    telegram: { token: botApi.token, apiRoot: botApi.apiRoot, webhookSecret: SECRET },
    maxConcurrent: options.maxConcurrent, laneLeaseMs: 30_000, pollMs: 1000,
  });
  try {
    await Promise.all(Array.from({ length: replicas }, (_, i) => set.start(`r${i + 1}`)));
    const urls = set.urls();
    await drive(urls, Math.min(options.sessions, 8 * replicas), 2, 'warm', waitReply);
    const before = pool ? await transactions(pool) : 0;
    counter?.reset();
    const run = await drive(urls, options.sessions, options.messagesPerSession, 'run', waitReply);
    // Statistics reach pg_stat_database when each backend flushes them (about once a second while idle).
    if (pool) await new Promise((r) => setTimeout(r, 1500));
    const after = pool ? await transactions(pool) : 0;
    const tally = counter?.tally();
    const turns = run.latencies.length;
    const perTurn = (n: number) => round(n / turns, 2);
    return {
      mode, replicas, llmMs, sessions: options.sessions, turns, turnsPerSecond: round(turns / run.seconds, 1),
      p50Ms: round(percentile(run.latencies, 50), 0), p99Ms: round(percentile(run.latencies, 99), 0),
      ...(pool ? { pgTransactionsPerTurn: round((after - before) / turns, 1) } : {}),
      ...(tally ? {
        statementsPerTurn: round(tally.total / turns, 1),
        topStatements: [...tally.bySql].sort((a, b) => b[1] - a[1]).slice(0, 24).map(([sql, n]) => ({ sql, perTurn: perTurn(n) })),
      } : {}),
    };
  } finally {
    await set.stopAll();
    await botApi.close();
    await llm.close();
    await pool?.end();
    await counter?.close();
    if (mode === 'cluster') await admin(options.adminUri, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Cluster throughput and latency: for each LLM latency, 1..n replicas in cluster mode (each a process of its
 * own on one shared database) and the embedded default, `sessions` conversations of `messagesPerSession` turns.
 */
export async function runClusterBench(options: ClusterBenchOptions): Promise<ClusterBenchRow[]> {
  const rows: ClusterBenchRow[] = [];
  for (const llmMs of options.llmLatencies) {
    const configs: ['cluster' | 'embedded', number][] = [...(options.embedded ? [['embedded', 1] as ['embedded', number]] : []), ...options.replicaCounts.map((n) => ['cluster', n] as ['cluster', number])];
    for (const [mode, replicas] of configs) {
      const row = await measure(options, mode, replicas, llmMs);
      const base = rows.find((r) => r.mode === mode && r.llmMs === llmMs && r.replicas === 1);
      if (base && replicas > 1) row.speedup = round(row.turnsPerSecond / base.turnsPerSecond, 2);
      rows.push(row);
      options.log?.(`${mode} × ${replicas}, LLM ${llmMs} ms: ${row.turnsPerSecond} turns/s, p50 ${row.p50Ms} ms, p99 ${row.p99Ms} ms${row.pgTransactionsPerTurn !== undefined ? `, ${row.pgTransactionsPerTurn} PG transactions/turn, ${row.statementsPerTurn} statements/turn` : ''} (load ${os.loadavg()[0]!.toFixed(1)})`);
      for (const s of row.topStatements ?? []) options.log?.(`    ${s.perTurn.toFixed(2).padStart(6)}  ${s.sql}`);
    }
  }
  return rows;
}
