import pg from 'pg';
import { redactUri } from './pg-database.ts';
import { MIGRATIONS } from './schema.ts';

/** What `switchboard doctor` says about the cluster database. */
export interface ClusterProbe {
  ok: boolean | 'warn';
  detail: string;
}

/** Connects to the cluster database, and reads its server version, schema state and live replicas. */
export async function probeClusterDatabase(uri: string, timeoutMs = 5000): Promise<ClusterProbe> {
  const client = new pg.Client({ connectionString: uri, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const version = ((await client.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? '?').split(' ')[0]!;
    if (Number.parseInt(version, 10) < 14) return { ok: false, detail: `PostgreSQL ${version} at ${redactUri(uri)}: cluster mode needs 14 or newer (idle_session_timeout)` };
    const exists = (await client.query<{ t: string | null }>(`SELECT to_regclass('sb_migration')::text AS t`)).rows[0]?.t;
    if (!exists) return { ok: 'warn', detail: `PostgreSQL ${version} at ${redactUri(uri)} answers; no Switchboard tables yet (the first replica to start creates them)` };
    const applied = new Set((await client.query<{ id: string }>('SELECT id FROM sb_migration')).rows.map((r) => r.id));
    const missing = MIGRATIONS.filter((m) => !applied.has(m.id)).map((m) => m.id);
    const live = (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM sb_replica WHERE seen_at > now() - interval '15 seconds'`)).rows[0]?.n ?? 0;
    const schema = missing.length ? `schema behind (${missing.join(', ')} applied at the next start)` : 'schema up to date';
    return { ok: true, detail: `PostgreSQL ${version} at ${redactUri(uri)}; ${schema}; ${live} live replica${live === 1 ? '' : 's'}` };
  } catch (error) {
    return { ok: false, detail: `cannot use ${redactUri(uri)}: ${(error as Error).message}; check that PostgreSQL runs there and the URI (store, SWITCHBOARD_STORE)` };
  } finally {
    await client.end().catch(() => undefined);
  }
}
