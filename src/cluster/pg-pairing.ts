import { defaultDeserialize, defaultSerialize } from '@keyv/serialize';
import type pg from 'pg';
import type { PairingOutcome, PairingRequest } from '../routing/pairing.ts';

/** What {@link requestPairingExclusive} needs to know of the request. */
export interface ExclusivePairingRequest {
  /** The namespaced keyv key prefix of the channel's pending codes (`pairing:code:<channel>:`). */
  prefix: string;
  /** The advisory lock that serializes requests of one channel across replicas. */
  lockName: string;
  peerId: string;
  now: number;
  maxPending: number;
  /** A new request with a fresh code (called only when one is created). */
  create: () => PairingRequest;
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
