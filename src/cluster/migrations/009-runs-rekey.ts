import type { Migration } from './migration.ts';

/** Migration 009: goal runs resumed and re-keying done once in cluster mode (issue 31). Empty SQL = not written yet (skipped, so it is not recorded as applied). */
export const MIGRATION_009: Migration = {
  id: '009-runs-rekey',
  sql: '',
};
