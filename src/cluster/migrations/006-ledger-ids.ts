import type { Migration } from './migration.ts';

/** Migration 006: sb_ledger rows with a unique id, inserted idempotently (issue 31). Empty SQL = not written yet (skipped, so it is not recorded as applied). */
export const MIGRATION_006: Migration = {
  id: '006-ledger-ids',
  sql: '',
};
