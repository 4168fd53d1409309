import { defaultDeserialize, defaultSerialize } from '@keyv/serialize';
import pg from 'pg';
import type { ExclusivePairingRequest, PairingOutcome, PairingRequest, SharedPairingState } from '../routing/pairing.ts';
import { PgKeyvAdapter } from './pg-keyv-adapter.ts';

/** Options of {@link pgPairingState}. */
export interface PgPairingOptions {
  /** The cluster database's URI. */
  uri: string;
  /** The cluster's shared pool (else one of its own is opened, closed with the store). */
  pool?: pg.Pool;
}

/** Pairing in cluster mode: the `pairing` keyv namespace in the cluster database, codes issued by {@link requestPairingExclusive}. */
export function pgPairingState(options: PgPairingOptions): SharedPairingState {
  const pool = options.pool ?? new pg.Pool({ connectionString: options.uri, max: 2 });
  if (!options.pool) pool.on('error', () => undefined);
  return {
    adapter: new PgKeyvAdapter({ pool, uri: options.uri }),
    requestExclusive: (request) => requestPairingExclusive(pool, request),
    close: async () => { if (!options.pool) await pool.end(); },
  };
}

/**
 * A pairing request in cluster mode: one short transaction holding `pg_advisory_xact_lock` on the channel, so
 * two replicas never both see 2 pending codes and add a third and a fourth. Expired codes are deleted on the way;
 * rows are keyv's own stored form (its default serializer, as Keyv writes and reads the namespace).
 */
export async function requestPairingExclusive(pool: pg.Pool, r: ExclusivePairingRequest): Promise<PairingOutcome> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [r.lockName]);
    const { rows } = await client.query<{ key: string; value: string }>(
      'SELECT key, value FROM keyv WHERE key COLLATE "C" >= $1 AND key COLLATE "C" < $2', [r.prefix, `${r.prefix.slice(0, -1)};`],
    );
    const pending: PairingRequest[] = [];
    for (const row of rows) {
      const request = defaultDeserialize<{ value?: PairingRequest }>(row.value)?.value;
      if (!request || request.expiresAt <= r.now) await client.query('DELETE FROM keyv WHERE key = $1', [row.key]);
      else pending.push(request);
    }
    const existing = pending.sort((a, b) => a.createdAt - b.createdAt).find((p) => p.peerId === r.peerId);
    let outcome: PairingOutcome;
    if (existing) outcome = { status: 'existing', request: existing };
    else if (pending.length >= r.maxPending) outcome = { status: 'full' };
    else {
      const request = r.create();
      const value = defaultSerialize({ value: request, expires: undefined });
      await client.query('INSERT INTO keyv (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [`${r.prefix}${request.code}`, value]);
      outcome = { status: 'created', request };
    }
    await client.query('COMMIT');
    return outcome;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
