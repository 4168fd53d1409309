import type { Migration } from './migration.ts';

/**
 * Migration 009 (issue 31): re-keying in cluster mode. `sb_routing` holds the routing fingerprint (identity links,
 * bindings, agents) the sessions were last keyed by: the replica that re-keys writes it in the same transaction as
 * the moves, under a transaction-level advisory lock, so replicas starting together re-key once. A transcript
 * keeps the keys it had (`former_keys`, as the JSONL header's `formerKeys`), and an entry merged away by
 * re-keying is kept in `sb_rekey_archive` (as `<stateDir>/archive/rekey/<sessionId>.json` on one machine).
 * Additive only: a replica of the previous version runs on beside it.
 */
export const MIGRATION_009: Migration = {
  id: '009-runs-rekey',
  sql: `
CREATE TABLE sb_routing (
  id smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  fingerprint text NOT NULL,
  at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE sb_transcript ADD COLUMN IF NOT EXISTS former_keys text[] NOT NULL DEFAULT '{}';
CREATE TABLE sb_rekey_archive (
  session_id text PRIMARY KEY,
  session_key text NOT NULL,
  merged_into text NOT NULL,
  entry jsonb NOT NULL,
  at timestamptz NOT NULL DEFAULT now()
);
`,
};
