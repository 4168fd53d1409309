import type { Migration } from './migration.ts';

/**
 * Migration 006 (issue 31), expand only (nothing is dropped or renamed, so a replica of the previous version keeps
 * working beside one of this version while it applies):
 *
 * - `sb_ledger.record_id`: the id a replica gives a record when it queues it, kept through retries. The writer
 *   inserts with `ON CONFLICT (record_id) DO NOTHING` and adds to the sums only the rows it inserted, so a batch
 *   whose commit acknowledgement was lost and is written again counts once. No default and no backfill: rows
 *   written before, by an older replica or by `switchboard migrate` have none (NULL, which the unique index
 *   allows any number of, and which every sum counts as before); filling them would rewrite the whole ledger
 *   under the migration's lock for nothing, since only a batch in flight is ever written twice.
 * - `sb_ledger_run_total`: the sums of scheduled work apart (SPEC §17), per job id and for the heartbeat, kept
 *   with each batch as `sb_ledger_total` is (so `/usage` shows `jobs` and `heartbeat` as one machine does, and
 *   they outlive the ledger's retention as the other sums do). Filled here from the rows there are; a record an
 *   older replica writes after this ran is in the other sums but not in these.
 */
export const MIGRATION_006: Migration = {
  id: '006-ledger-ids',
  sql: `
ALTER TABLE sb_ledger ADD COLUMN record_id text;
CREATE UNIQUE INDEX sb_ledger_record_id ON sb_ledger (record_id);

-- run: 'job' (job_id: the job) or 'heartbeat' (job_id: ''), as the one-machine totals file them.
CREATE TABLE sb_ledger_run_total (
  run text NOT NULL,
  job_id text NOT NULL,
  calls bigint NOT NULL,
  estimated_calls bigint NOT NULL,
  input_tokens bigint NOT NULL,
  output_tokens bigint NOT NULL,
  cache_read_tokens bigint NOT NULL,
  cache_write_tokens bigint NOT NULL,
  first_at timestamptz NOT NULL,
  PRIMARY KEY (run, job_id)
);
INSERT INTO sb_ledger_run_total
SELECT run, job_id, count(*), count(*) FILTER (WHERE (record->>'isEstimated')::boolean),
  coalesce(sum((record->>'inputTokens')::bigint), 0), coalesce(sum((record->>'outputTokens')::bigint), 0),
  coalesce(sum((record->>'cacheReadTokens')::bigint), 0), coalesce(sum((record->>'cacheWriteTokens')::bigint), 0), min(at)
FROM (
  SELECT CASE WHEN coalesce(record->>'jobId', '') <> '' THEN 'job' ELSE 'heartbeat' END AS run, coalesce(record->>'jobId', '') AS job_id, record, at
  FROM sb_ledger WHERE coalesce(record->>'jobId', '') <> '' OR record->>'run' = 'heartbeat'
) r
GROUP BY run, job_id;
`,
};
