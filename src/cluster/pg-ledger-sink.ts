import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { LedgerStore } from '../accounting/accounting.ts';
import { recordTotal, type LedgerRecord } from '../accounting/ledger-record.ts';
import type { ProviderUsage } from '../accounting/provider-tracker.ts';
import { emptyTotals, type TokenTotals, type UsageReport } from '../accounting/runtime-totals.ts';
import type { Logger } from '../core/logger.ts';
import { entryJson } from './pg-transcript-store.ts';
import type { Queryable } from './session-query.ts';

/** Options of {@link PgLedgerSink}. */
export interface PgLedgerSinkOptions {
  pool: pg.Pool;
  logger: Logger;
  /** This replica, stored with each record (`replica_id`). */
  replicaId: string;
  /** Process start (epoch ms): the `since` of an empty ledger. */
  startedAt: number;
  /** Records per statement (default 500). */
  maxBatch?: number;
  /** Records kept in memory while the database refuses writes; older ones are dropped (and logged). Default 100,000. */
  maxPending?: number;
  /** First retry delay after a failed write (doubles up to 30 s; default 1 s). */
  retryMs?: number;
}

const SUM_COLUMNS = `calls = t.calls + excluded.calls, estimated_calls = t.estimated_calls + excluded.estimated_calls,
  input_tokens = t.input_tokens + excluded.input_tokens, output_tokens = t.output_tokens + excluded.output_tokens,
  cache_read_tokens = t.cache_read_tokens + excluded.cache_read_tokens, cache_write_tokens = t.cache_write_tokens + excluded.cache_write_tokens,
  first_at = least(t.first_at, excluded.first_at)`;

/** The sums of some ledger rows' records, then their first time (the columns after the keys of the sums tables). */
const ROW_SUMS = `count(*), count(*) FILTER (WHERE (record->>'isEstimated')::boolean),
  coalesce(sum((record->>'inputTokens')::bigint), 0), coalesce(sum((record->>'outputTokens')::bigint), 0),
  coalesce(sum((record->>'cacheReadTokens')::bigint), 0), coalesce(sum((record->>'cacheWriteTokens')::bigint), 0), min(at)`;

/**
 * The records in, and added to the sums, in one statement (so also one transaction). Only the rows inserted are
 * added: a record whose id is already in `sb_ledger` conflicts and is left out. The sums are upserted in key order
 * (collation "C"), the same for every writer, so two replicas' batches never lock the same sums in opposite orders.
 * Scheduled work's sums (`sb_ledger_run_total`) file a record with a `jobId` under its job, else one of a heartbeat
 * run under the heartbeat, as the one-machine totals do.
 */
const INSERT_RECORDS = `
WITH ins AS (
  INSERT INTO sb_ledger (at, session_key, session_id, channel, provider_id, model_id, kind, replica_id, record, record_id)
  SELECT at, session_key, session_id, channel, provider_id, model_id, kind, $8, record, record_id FROM unnest(
    $1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $9::jsonb[], $10::text[]
  ) WITH ORDINALITY AS r(at, session_key, session_id, channel, provider_id, model_id, kind, record, record_id, i) ORDER BY i
  ON CONFLICT (record_id) DO NOTHING RETURNING provider_id, model_id, kind, channel, at, record
), totals AS (
  INSERT INTO sb_ledger_total AS t
  SELECT provider_id, model_id, kind, channel, ${ROW_SUMS} FROM ins GROUP BY provider_id, model_id, kind, channel
  ORDER BY provider_id COLLATE "C", model_id COLLATE "C", kind COLLATE "C", channel COLLATE "C"
  ON CONFLICT (provider_id, model_id, kind, channel) DO UPDATE SET ${SUM_COLUMNS}
), runs AS (
  INSERT INTO sb_ledger_run_total AS t
  SELECT run, job_id, ${ROW_SUMS} FROM (
    SELECT CASE WHEN coalesce(record->>'jobId', '') <> '' THEN 'job' ELSE 'heartbeat' END AS run, coalesce(record->>'jobId', '') AS job_id, record, at
    FROM ins WHERE coalesce(record->>'jobId', '') <> '' OR record->>'run' = 'heartbeat'
  ) r GROUP BY run, job_id ORDER BY run COLLATE "C", job_id COLLATE "C"
  ON CONFLICT (run, job_id) DO UPDATE SET ${SUM_COLUMNS}
)
SELECT count(*)::int AS inserted FROM ins`;

/**
 * Inserts ledger records and adds them to the sums, in one statement (`db` may be a pool, or a client inside a
 * transaction of the caller's). Used by the sink's writer and by `switchboard migrate`. With `ids` (one per
 * record: the id the record was queued with), a record whose id is already in `sb_ledger` (its batch committed
 * before, and the acknowledgement was lost) is neither inserted nor added again. Returns how many records were
 * inserted.
 */
export async function insertLedgerRecords(db: Queryable, records: readonly LedgerRecord[], replicaId: string, ids?: readonly string[]): Promise<number> {
  if (!records.length) return 0;
  const { rows } = await db.query<{ inserted: number }>(INSERT_RECORDS, [
    records.map((r) => r.timestamp), records.map((r) => r.sessionKey), records.map((r) => r.sessionId), records.map((r) => r.channel),
    records.map((r) => r.providerId), records.map((r) => r.modelId), records.map((r) => r.kind), replicaId, records.map((r) => entryJson(r)),
    records.map((_, i) => ids?.[i] ?? null),
  ]);
  return rows[0]?.inserted ?? 0;
}

/** Token sums as SQL returns them (bigint as text). */
interface SumRow { calls: string; estimated_calls: string; input_tokens: string; output_tokens: string; cache_read_tokens: string; cache_write_tokens: string }

const SUMS = `coalesce(sum(calls), 0) AS calls, coalesce(sum(estimated_calls), 0) AS estimated_calls, coalesce(sum(input_tokens), 0) AS input_tokens,
  coalesce(sum(output_tokens), 0) AS output_tokens, coalesce(sum(cache_read_tokens), 0) AS cache_read_tokens, coalesce(sum(cache_write_tokens), 0) AS cache_write_tokens`;

/** The same sums over `sb_ledger` rows (one session key's: its index keeps this short). */
const RECORD_SUMS = `count(*) AS calls, count(*) FILTER (WHERE (record->>'isEstimated')::boolean) AS estimated_calls,
  coalesce(sum((record->>'inputTokens')::bigint), 0) AS input_tokens, coalesce(sum((record->>'outputTokens')::bigint), 0) AS output_tokens,
  coalesce(sum((record->>'cacheReadTokens')::bigint), 0) AS cache_read_tokens, coalesce(sum((record->>'cacheWriteTokens')::bigint), 0) AS cache_write_tokens`;

function totalsOf(row: SumRow | undefined): TokenTotals {
  if (!row) return emptyTotals();
  const t = {
    inputTokens: Number(row.input_tokens), outputTokens: Number(row.output_tokens),
    cacheReadTokens: Number(row.cache_read_tokens), cacheWriteTokens: Number(row.cache_write_tokens),
  };
  return { ...t, totalTokens: recordTotal(t), llmCalls: Number(row.calls), estimatedCalls: Number(row.estimated_calls) };
}

/**
 * The token ledger in cluster mode (SPEC §4, §13): records go to `sb_ledger` in batches, written by one
 * background writer (a turn never waits; a failed write is retried with backoff; {@link close} flushes), with
 * the sums per provider, model, kind and channel kept in `sb_ledger_total` by the same transaction. The
 * figures derived from the ledger (`/usage`, `/metrics/providers`, `/admin/providers`, timelines, `/usage` of
 * a session) are read from SQL, so every replica answers the same.
 */
export class PgLedgerSink implements LedgerStore {
  private readonly options: PgLedgerSinkOptions;
  /** Records queued with the id each keeps through retries (see {@link insertLedgerRecords}). */
  private pending: { record: LedgerRecord; id: string }[] = [];
  private writing: Promise<boolean> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelay: number;
  private failing = false;
  private closed = false;

  constructor(options: PgLedgerSinkOptions) {
    this.options = options;
    this.retryDelay = options.retryMs ?? 1000;
  }

  /** Records queued and not yet written. */
  get queued(): number {
    return this.pending.length;
  }

  /** Queues one record (with a new id); the write happens in the background. */
  append(record: LedgerRecord): void {
    this.pending.push({ record, id: randomUUID() });
    const max = this.options.maxPending ?? 100_000;
    if (this.pending.length > max) {
      const dropped = this.pending.splice(0, this.pending.length - max).length;
      this.options.logger.error({ dropped }, 'ledger writes to the cluster database keep failing; dropped the oldest queued records');
    }
    if (!this.retryTimer) this.writing ??= this.drain();
  }

  /** Resolves once every record appended so far is written, or a write attempt failed (and was logged). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (!this.pending.length) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.writing = this.drain();
    await this.writing;
  }

  /** Flushes, and stops retrying (what could not be written is logged as lost). */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.pending.length) this.options.logger.error({ lost: this.pending.length }, 'ledger records not written to the cluster database at shutdown');
  }

  /** Writes batches until the queue is empty; on a failure keeps the batch, retries later. True when all was written. */
  private async drain(): Promise<boolean> {
    try {
      while (this.pending.length) {
        const batch = this.pending.slice(0, this.options.maxBatch ?? 500);
        try {
          await this.write(batch);
        } catch (error) {
          this.scheduleRetry(error);
          return false;
        }
        this.pending.splice(0, batch.length);
        if (this.failing) this.options.logger.info('ledger writes to the cluster database work again');
        this.failing = false;
        this.retryDelay = this.options.retryMs ?? 1000;
      }
      return true;
    } finally {
      this.writing = undefined;
    }
  }

  /** One statement, so no transaction of its own (see {@link insertLedgerRecords}). */
  private async write(batch: readonly { record: LedgerRecord; id: string }[]): Promise<void> {
    await insertLedgerRecords(this.options.pool, batch.map((q) => q.record), this.options.replicaId, batch.map((q) => q.id));
  }

  private scheduleRetry(error: unknown): void {
    if (!this.failing) this.options.logger.error({ err: error, queued: this.pending.length }, 'could not write ledger records to the cluster database; retrying');
    this.failing = true;
    if (this.closed) return;
    const delay = this.retryDelay;
    this.retryDelay = Math.min(30_000, delay * 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.writing ??= this.drain();
    }, delay);
    this.retryTimer.unref();
  }

  /**
   * Deletes records older than `before` (`ledger.retentionDays`); returns how many. The sums keep counting
   * them, as the one-machine totals outlive deleted archives; a key's totals and timeline lose them.
   */
  async prune(before: Date): Promise<number> {
    const { rowCount } = await this.options.pool.query('DELETE FROM sb_ledger WHERE at < $1', [before]);
    return rowCount ?? 0;
  }

  /**
   * `GET /usage`: totals of the whole cluster, per channel, and scheduled work apart (per job and the heartbeat,
   * whose calls are also in the totals and in `channels.internal`), as the one-machine ledger reports them. One
   * statement over the sums.
   */
  async usage(): Promise<UsageReport> {
    const { rows } = await this.options.pool.query<SumRow & { scope: string; id: string; first_at: Date | null }>(
      `SELECT 'channel' AS scope, channel AS id, ${SUMS}, min(first_at) AS first_at FROM sb_ledger_total GROUP BY channel
       UNION ALL SELECT run, job_id, ${SUMS}, min(first_at) FROM sb_ledger_run_total GROUP BY run, job_id`,
    );
    const totals = emptyTotals();
    const channels: Record<string, TokenTotals> = {};
    const jobs: [string, TokenTotals][] = [];
    let heartbeat = emptyTotals();
    let first: Date | undefined;
    for (const row of rows) {
      const t = totalsOf(row);
      if (row.scope === 'job') jobs.push([row.id, t]);
      else if (row.scope === 'heartbeat') heartbeat = t;
      else channels[row.id] = t;
      if (row.scope !== 'channel') continue;
      for (const k of Object.keys(totals) as (keyof TokenTotals)[]) totals[k] += t[k];
      if (row.first_at && (!first || row.first_at < first)) first = row.first_at;
    }
    // The one-machine report's orders: channels and jobs by id.
    const sortedChannels = Object.fromEntries(Object.entries(channels).sort(([a], [b]) => a.localeCompare(b)));
    return {
      since: (first ?? new Date(this.options.startedAt)).toISOString(), totals, channels: sortedChannels,
      jobs: Object.fromEntries(jobs.sort(([a], [b]) => a.localeCompare(b))), heartbeat,
    };
  }

  /** Requests (LLM calls that returned) and tokens per provider and model, sorted; retries and errors are not in the ledger (0). */
  async providerUsage(): Promise<ProviderUsage[]> {
    const { rows } = await this.options.pool.query<SumRow & { provider_id: string; model_id: string }>(
      `SELECT provider_id, model_id, ${SUMS} FROM sb_ledger_total GROUP BY provider_id, model_id ORDER BY provider_id COLLATE "C", model_id COLLATE "C"`,
    );
    return rows.map((row) => {
      const t = totalsOf(row);
      return {
        providerId: row.provider_id, modelId: row.model_id, requests: t.llmCalls, retries: 0, errors: 0,
        inputTokens: t.inputTokens, outputTokens: t.outputTokens, cacheReadTokens: t.cacheReadTokens, cacheWriteTokens: t.cacheWriteTokens,
      };
    });
  }

  /** The most recent records of the cluster, newest first (at most `limit`, ≤ 1000). */
  async recent(limit: number): Promise<LedgerRecord[]> {
    const n = Math.max(0, Math.min(1000, Math.floor(limit)));
    if (!n) return [];
    const { rows } = await this.options.pool.query<{ record: LedgerRecord }>('SELECT record FROM sb_ledger ORDER BY id DESC LIMIT $1', [n]);
    return rows.map((r) => r.record);
  }

  /** The last `limit` records of a session key (every session id it had), oldest first. */
  async timeline(sessionKey: string, limit: number): Promise<LedgerRecord[]> {
    const n = Math.max(0, Math.min(10_000, Math.floor(limit)));
    if (!n) return [];
    const { rows } = await this.options.pool.query<{ record: LedgerRecord }>(
      'SELECT record FROM sb_ledger WHERE session_key = $1 ORDER BY id DESC LIMIT $2', [sessionKey, n],
    );
    return rows.map((r) => r.record).reverse();
  }

  /** Totals of a session key across its resets, and how many session ids that was. */
  async keyTotals(sessionKey: string): Promise<TokenTotals & { sessions: number }> {
    const { rows } = await this.options.pool.query<SumRow & { sessions: string }>(
      `SELECT ${RECORD_SUMS}, count(DISTINCT session_id) AS sessions FROM sb_ledger WHERE session_key = $1`, [sessionKey],
    );
    return { ...totalsOf(rows[0]), sessions: Number(rows[0]?.sessions ?? 0) };
  }

  /** Totals of one session id of a key. */
  async sessionTotals(sessionKey: string, sessionId: string): Promise<TokenTotals> {
    const { rows } = await this.options.pool.query<SumRow>(
      `SELECT ${RECORD_SUMS} FROM sb_ledger WHERE session_key = $1 AND session_id = $2`, [sessionKey, sessionId],
    );
    return totalsOf(rows[0]);
  }
}
