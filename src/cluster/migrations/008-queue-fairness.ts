import type { Migration } from './migration.ts';

/** Migration 008: the lane that waited longest is claimed first, and fewer statements per turn (issue 31). Empty SQL = not written yet (skipped, so it is not recorded as applied). */
export const MIGRATION_008: Migration = {
  id: '008-queue-fairness',
  sql: '',
};
