/**
 * The cluster database's schema, as versioned migrations (SPEC §13). Each runs once, in order, inside one
 * transaction under a database-wide advisory lock, so replicas starting together apply it exactly once.
 * Never edit an applied migration: add the next one.
 */
import { MIGRATION_006 } from './migrations/006-ledger-ids.ts';
import { MIGRATION_007 } from './migrations/007-rate-limits.ts';
import { MIGRATION_008 } from './migrations/008-queue-fairness.ts';
import { MIGRATION_009 } from './migrations/009-runs-rekey.ts';
import { MIGRATION_010 } from './migrations/010-inbox-live.ts';
import { MIGRATION_011 } from './migrations/011-webchat-replies.ts';
import type { Migration } from './migrations/migration.ts';

export type { Migration } from './migrations/migration.ts';

export const MIGRATIONS: readonly Migration[] = [
  {
    id: '001-cluster',
    sql: `
-- Session entries: @keyv/postgres's own table (namespaced keys, keyv's serialized value).
CREATE TABLE IF NOT EXISTS keyv (key VARCHAR(1024) PRIMARY KEY, value TEXT);

-- One row per session key that ever had queued work. seq order is the order of acceptance.
CREATE TABLE sb_lane (
  session_key text PRIMARY KEY,
  next_seq bigint NOT NULL DEFAULT 0,
  done_seq bigint NOT NULL DEFAULT 0,
  owner text,
  ready_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sb_lane_ready ON sb_lane (ready_at) WHERE next_seq > done_seq;

-- Accepted messages (platform deliveries and internal work): the durable queue.
CREATE TABLE sb_inbox (
  session_key text NOT NULL,
  seq bigint NOT NULL,
  delivery_key text NOT NULL,
  message jsonb NOT NULL,
  correlation_id text NOT NULL,
  accepted_at timestamptz NOT NULL DEFAULT now(),
  attempts int NOT NULL DEFAULT 0,
  sending int NOT NULL DEFAULT 0,
  sent int NOT NULL DEFAULT 0,
  done_at timestamptz,
  result jsonb,
  PRIMARY KEY (session_key, seq)
);
CREATE INDEX sb_inbox_done ON sb_inbox (done_at) WHERE done_at IS NOT NULL;

-- Delivery ids seen (any outcome), for the dedupe of redeliveries across replicas (48 h).
CREATE TABLE sb_delivery (
  delivery_key text PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  outcome text NOT NULL
);
CREATE INDEX sb_delivery_at ON sb_delivery (at);

-- Transcripts: one row per session id, one per entry (n = position).
CREATE TABLE sb_transcript (
  session_id text PRIMARY KEY,
  session_key text NOT NULL,
  agent_id text NOT NULL,
  created_at timestamptz NOT NULL,
  archived_at timestamptz
);
CREATE INDEX sb_transcript_key ON sb_transcript (session_key);
CREATE TABLE sb_transcript_entry (
  session_id text NOT NULL REFERENCES sb_transcript (session_id) ON DELETE CASCADE,
  n bigserial,
  entry jsonb NOT NULL,
  PRIMARY KEY (session_id, n)
);

-- The token ledger (SPEC §4 records), one row per LLM call.
CREATE TABLE sb_ledger (
  id bigserial PRIMARY KEY,
  at timestamptz NOT NULL,
  session_key text NOT NULL,
  session_id text NOT NULL,
  channel text NOT NULL,
  provider_id text NOT NULL,
  model_id text NOT NULL,
  kind text NOT NULL,
  replica_id text NOT NULL,
  record jsonb NOT NULL
);
CREATE INDEX sb_ledger_session ON sb_ledger (session_key, id);

-- Skipped group messages kept as context for the next triggered turn (capped per key by the writer).
CREATE TABLE sb_group_context (
  id bigserial PRIMARY KEY,
  session_key text NOT NULL,
  at timestamptz NOT NULL,
  name text NOT NULL,
  text text NOT NULL
);
CREATE INDEX sb_group_context_key ON sb_group_context (session_key, id);

-- Replicas: a row per process that ever started; live while it holds its liveness lock.
CREATE TABLE sb_replica (
  replica_id text PRIMARY KEY,
  host text NOT NULL,
  pid int NOT NULL,
  url text,
  version text NOT NULL,
  started_at timestamptz NOT NULL,
  seen_at timestamptz NOT NULL
);

-- Counters shared by the cluster (lane takeovers, reruns, duplicate-reply windows hit, lease losses).
CREATE TABLE sb_counter (
  name text PRIMARY KEY,
  value bigint NOT NULL DEFAULT 0
);
`,
  },
  {
    // The stores' own needs (issue 18): key order independent of the database's collation (session lists page
    // by key); token sums per provider, model, kind and channel kept with each ledger batch, so /usage and
    // /metrics/providers read a few rows instead of summing the whole ledger; the progress of `switchboard migrate`.
    id: '002-store-indexes-ledger-totals',
    sql: `
CREATE INDEX IF NOT EXISTS keyv_key_c ON keyv (key COLLATE "C");

CREATE TABLE sb_ledger_total (
  provider_id text NOT NULL,
  model_id text NOT NULL,
  kind text NOT NULL,
  channel text NOT NULL,
  calls bigint NOT NULL,
  estimated_calls bigint NOT NULL,
  input_tokens bigint NOT NULL,
  output_tokens bigint NOT NULL,
  cache_read_tokens bigint NOT NULL,
  cache_write_tokens bigint NOT NULL,
  first_at timestamptz NOT NULL,
  PRIMARY KEY (provider_id, model_id, kind, channel)
);
INSERT INTO sb_ledger_total
SELECT provider_id, model_id, kind, channel, count(*), count(*) FILTER (WHERE (record->>'isEstimated')::boolean),
  coalesce(sum((record->>'inputTokens')::bigint), 0), coalesce(sum((record->>'outputTokens')::bigint), 0),
  coalesce(sum((record->>'cacheReadTokens')::bigint), 0), coalesce(sum((record->>'cacheWriteTokens')::bigint), 0), min(at)
FROM sb_ledger GROUP BY provider_id, model_id, kind, channel;
-- Records past ledger.retentionDays are deleted by time (the sums above keep counting them, as the local snapshot does).
CREATE INDEX sb_ledger_at ON sb_ledger (at);

-- What \`switchboard migrate\` copied of each source whose rows have no key of their own (a ledger file, known by
-- the hash of its first record, so a rotated or compressed copy is the same source): records copied so far.
CREATE TABLE sb_migrated (
  source text PRIMARY KEY,
  records bigint NOT NULL,
  at timestamptz NOT NULL DEFAULT now()
);
`,
  },
  {
    // Channels in cluster mode (issue 18): the last accepted message per chat (a Discord channel), shared so that
    // the replica taking over a shard back-fills from where intake stopped. Snowflakes are unsigned 64-bit: numeric.
    id: '003-channel-watermarks',
    sql: `
CREATE TABLE sb_channel_watermark (
  account text NOT NULL,
  chat_id text NOT NULL,
  guild_id text,
  last_id numeric(20, 0) NOT NULL,
  at timestamptz NOT NULL,
  PRIMARY KEY (account, chat_id)
);
CREATE INDEX sb_channel_watermark_at ON sb_channel_watermark (account, at);
`,
  },
  {
    // Media in cluster mode (issue 28, SPEC §15): fetched files, content-addressed, so any replica rebuilds a
    // session's context with its images. Swept by stored_at (retention, then the oldest beyond the quota).
    id: '004-media',
    sql: `
CREATE TABLE sb_media (
  sha256 text PRIMARY KEY,
  mime text NOT NULL,
  size bigint NOT NULL,
  data bytea NOT NULL,
  stored_at timestamptz NOT NULL
);
CREATE INDEX sb_media_stored_at ON sb_media (stored_at);
`,
  },
  {
    // Scheduled jobs in cluster mode (issue 29, SPEC §17): the runtime jobs (config jobs are not stored) and every
    // job's state, shared so that a due time is claimed by one replica (a conditional upsert of last_due_at).
    // No foreign key: config jobs have a state and no sb_job row.
    id: '005-jobs',
    sql: `
CREATE TABLE sb_job (
  job_id text PRIMARY KEY,
  created_at timestamptz NOT NULL,
  job jsonb NOT NULL
);
CREATE TABLE sb_job_state (
  job_id text PRIMARY KEY,
  since timestamptz NOT NULL,
  last_due_at timestamptz,
  last_run_at timestamptz,
  last_outcome text,
  last_error text,
  runs bigint NOT NULL DEFAULT 0,
  paused boolean NOT NULL DEFAULT false
);
`,
  },
  // Later migrations live in ./migrations/, one file each; one whose SQL is still empty is skipped.
  ...[MIGRATION_006, MIGRATION_007, MIGRATION_008, MIGRATION_009, MIGRATION_010, MIGRATION_011].filter((m) => m.sql.trim() !== ''),
];
