import type { Migration } from './migration.ts';

/** Migration 007: rate-limit buckets shared by the replicas (issue 31). Empty SQL = not written yet (skipped, so it is not recorded as applied). */
export const MIGRATION_007: Migration = {
  id: '007-rate-limits',
  sql: '',
};
