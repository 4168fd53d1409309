import type { Migration } from './migration.ts';

/**
 * Migration 010: the messages a queued message's live reply posted (SPEC §16), journaled with it, so a replica that
 * runs it again after a crash edits them into the answer instead of posting a second copy (on one machine the
 * inbox journal's `live` records do this). Additive only: a replica of the previous version leaves it empty.
 */
export const MIGRATION_010: Migration = {
  id: '010-inbox-live',
  sql: 'ALTER TABLE sb_inbox ADD COLUMN IF NOT EXISTS live jsonb;',
};
