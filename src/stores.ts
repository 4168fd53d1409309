import type pg from 'pg';
import { isClusterStore } from './cluster/pg-database.ts';
import { pgPairingState } from './cluster/pg-pairing.ts';
import { openPgSessionStore } from './cluster/pg-session-store.ts';
import { PgMediaStore } from './cluster/pg-media-store.ts';
import { PgJobStore } from './cluster/pg-job-store.ts';
import type { JobStore } from './scheduler/jobs.ts';
import { SqliteJobStore } from './scheduler/sqlite-job-store.ts';
import path from 'node:path';
import type { Logger } from './core/logger.ts';
import { FileMediaStore } from './media/file-media-store.ts';
import type { MediaStore } from './media/media-store.ts';
import type { Clock } from './core/clock.ts';
import { PairingStore } from './routing/pairing.ts';
import { KeyvSessionStore } from './sessions/store.ts';

/*
 * The one place that turns the `store` URI into stores. Each store is a port defined where it is used
 * (`src/sessions/`, `src/routing/`); a `postgres://` URI gets the cluster's implementations from `src/cluster/`,
 * anything else the local ones. Nothing below this file knows which one it was given.
 */

/** Options of the store openers. */
export interface StoreOptions {
  /** Cluster mode: the shared pool (else a cluster store opens a small one of its own, closed with it). */
  pool?: pg.Pool;
}

/** The session store at `uri`: PostgreSQL's `keyv` table in cluster mode, else keyv's local store (`sqlite://…`). */
export async function openSessionStore(uri: string, options: StoreOptions = {}): Promise<KeyvSessionStore> {
  return isClusterStore(uri) ? openPgSessionStore({ uri, pool: options.pool }) : KeyvSessionStore.open(uri);
}

/** The pairing store next to the session store at `uri`: shared in cluster mode, else in the same SQLite file (or memory). */
export function openPairingStore(uri: string, options: StoreOptions & { clock: Clock }): PairingStore {
  return isClusterStore(uri)
    ? new PairingStore({ clock: options.clock, shared: pgPairingState({ uri, pool: options.pool }) })
    : new PairingStore({ uri, clock: options.clock });
}

/** The media store (SPEC §15): cluster mode's `sb_media` table on the shared pool, else files under `stateDir/media`. */
export function openMediaStore(options: { stateDir: string; logger: Logger; pool?: pg.Pool }): MediaStore {
  return options.pool
    ? new PgMediaStore({ pool: options.pool, logger: options.logger })
    : new FileMediaStore({ dir: path.join(options.stateDir, 'media'), logger: options.logger });
}

/** The job store (SPEC §17): cluster mode's `sb_job` tables on the shared pool, else `stateDir/jobs.sqlite`. */
export function openJobStore(options: { stateDir: string; pool?: pg.Pool }): JobStore {
  return options.pool ? new PgJobStore({ pool: options.pool }) : SqliteJobStore.open(path.join(options.stateDir, 'jobs.sqlite'));
}
