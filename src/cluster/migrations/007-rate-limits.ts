import type { Migration } from './migration.ts';

/**
 * Migration 007: `limits.perSender`'s token buckets shared by the replicas (issue 31; `src/cluster/pg-rate-buckets.ts`).
 * One row per sender; a take is one `INSERT … ON CONFLICT DO UPDATE … RETURNING` that refills and takes in SQL,
 * so replicas racing for the last token are serialized on the row. Times are epoch ms of the replicas' clocks.
 * Only the primary key is indexed, so a take's update stays a HOT update (fillfactor leaves room on the page);
 * the rare sweep of full buckets scans the table. UNLOGGED: a take writes no WAL, so its commit does not wait
 * for a WAL flush (about half the time per take, measured); after a PostgreSQL crash or a failover to a standby
 * the table is empty, and every sender starts with a full bucket, which is all a limit may lose.
 */
export const MIGRATION_007: Migration = {
  id: '007-rate-limits',
  sql: `
CREATE UNLOGGED TABLE sb_rate_bucket (
  bucket_key text PRIMARY KEY,
  -- Tokens left after the last take (may be fractional; below 1 after a refusal).
  tokens double precision NOT NULL,
  -- When tokens was computed (epoch ms); refill counts from here.
  at_ms bigint NOT NULL,
  -- When the sender was last told to slow down (epoch ms), so one notice per window across the replicas.
  noticed_ms bigint,
  -- The outcome of the last take, read back by RETURNING.
  allowed boolean NOT NULL,
  notified boolean NOT NULL
) WITH (fillfactor = 80);
`,
};
