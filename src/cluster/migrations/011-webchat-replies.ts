import type { Migration } from './migration.ts';

/**
 * Migration 011: web chat replies whose request went away (the page closed mid-turn). On one machine such a reply
 * goes to the user's other open pages; in cluster mode those may be connected to other replicas, which read these
 * rows (kept an hour: pages only look a few seconds back). Additive only.
 */
export const MIGRATION_011: Migration = {
  id: '011-webchat-replies',
  sql: `
CREATE TABLE IF NOT EXISTS sb_webchat_reply (
  id bigserial PRIMARY KEY,
  user_id text NOT NULL,
  push jsonb NOT NULL,
  replica text NOT NULL,
  at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS sb_webchat_reply_at ON sb_webchat_reply (at);
`,
};
