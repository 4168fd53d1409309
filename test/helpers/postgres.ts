import { closeSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe } from 'vitest';
import { migrate } from '../../src/cluster/pg-database.ts';

/** The variable that turns the PostgreSQL tests on: a URI whose user may create databases. */
export const POSTGRES_ENV = 'SWITCHBOARD_TEST_POSTGRES';

/** The admin URI, e.g. `postgres://root@127.0.0.1:5432/test`; undefined when the tests are off. */
export const adminUri: string | undefined = process.env[POSTGRES_ENV] || undefined;

/**
 * Says once per test run (not once per file: vitest runs files in forks of one process) that the
 * PostgreSQL tests are skipped and which variable turns them on.
 */
function announceSkip(): void {
  try {
    closeSync(openSync(path.join(tmpdir(), `switchboard-pg-skip-${process.ppid}`), 'wx'));
  } catch {
    return;
  }
  console.log(`PostgreSQL tests skipped: set ${POSTGRES_ENV}=postgres://root@127.0.0.1:5432/test to run them.`);
}

/** `describe` when {@link POSTGRES_ENV} is set, else `describe.skip` (with one line saying why). */
export const describePg = describe.skipIf(!adminUri);
if (!adminUri) announceSkip();

/** A fresh database of one test file, migrated. */
export interface TestDatabase {
  /** Its URI (the admin URI with the database name replaced). */
  uri: string;
  /** A pool on it (ended after the file). */
  pool: pg.Pool;
}

/** The URI of another database on the same server. */
function withDatabase(uri: string, name: string): string {
  const url = new URL(uri);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Creates `sb_t_<random>` before the file's tests and runs the migrations there; drops it after. Call at the
 * top of a file whose tests are inside {@link describePg}; the returned object is filled in by `beforeAll`.
 */
export function useTestDatabase(options: { migrate?: boolean } = {}): TestDatabase {
  const db = {} as TestDatabase;
  if (!adminUri) return db;
  const name = `sb_t_${randomBytes(6).toString('hex')}`;
  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: adminUri });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    db.uri = withDatabase(adminUri, name);
    db.pool = new pg.Pool({ connectionString: db.uri, max: 6 });
    db.pool.on('error', () => undefined);
    if (options.migrate !== false) await migrate(db.pool);
  });
  afterAll(async () => {
    await db.pool?.end();
    const admin = new pg.Client({ connectionString: adminUri });
    await admin.connect();
    try {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  });
  return db;
}
