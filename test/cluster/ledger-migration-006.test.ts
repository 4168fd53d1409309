import { expect, it } from 'vitest';
import type { LedgerRecord } from '../../src/accounting/ledger-record.ts';
import { migrate } from '../../src/cluster/pg-database.ts';
import { PgLedgerSink } from '../../src/cluster/pg-ledger-sink.ts';
import { MIGRATIONS } from '../../src/cluster/schema.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { record } from '../accounting/records.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import type pg from 'pg';

const db = useTestDatabase({ migrate: false });
const STARTED = Date.UTC(2025, 0, 1);
const usage = (input: number, output: number) => ({ inputTokens: input, outputTokens: output, cacheReadTokens: 0, cacheWriteTokens: 0 });

/** A batch as a replica of the version before migration 006 writes it (no record id; the sums of sb_ledger_total only). */
async function writeAsOldReplica(pool: pg.Pool, records: LedgerRecord[]): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO sb_ledger (at, session_key, session_id, channel, provider_id, model_id, kind, replica_id, record)
       SELECT at, session_key, session_id, channel, provider_id, model_id, kind, $8, record FROM unnest(
         $1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $9::jsonb[]
       ) WITH ORDINALITY AS r(at, session_key, session_id, channel, provider_id, model_id, kind, record, i) ORDER BY i`,
      [records.map((r) => r.timestamp), records.map((r) => r.sessionKey), records.map((r) => r.sessionId), records.map((r) => r.channel),
        records.map((r) => r.providerId), records.map((r) => r.modelId), records.map((r) => r.kind), 'old', records.map((r) => JSON.stringify(r))],
    );
    for (const r of records) {
      await client.query(
        `INSERT INTO sb_ledger_total AS t VALUES ($1, $2, $3, $4, 1, $5, $6, $7, 0, 0, $8)
         ON CONFLICT (provider_id, model_id, kind, channel) DO UPDATE SET calls = t.calls + 1, estimated_calls = t.estimated_calls + excluded.estimated_calls,
           input_tokens = t.input_tokens + excluded.input_tokens, output_tokens = t.output_tokens + excluded.output_tokens, first_at = least(t.first_at, excluded.first_at)`,
        [r.providerId, r.modelId, r.kind, r.channel, r.isEstimated ? 1 : 0, r.inputTokens, r.outputTokens, r.timestamp],
      );
    }
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

describePg('migration 006 (ledger ids, sums of scheduled work): expand only', () => {
  it('rows written before it, and by an older replica beside a newer one after it, have no id and still sum', async () => {
    await migrate(db.pool, MIGRATIONS.filter((m) => m.id < '006'));
    const key = 'agent:main:telegram:direct:1';
    await writeAsOldReplica(db.pool, [
      record({ correlationId: 'o1', sessionKey: key, usage: usage(10, 1), at: STARTED + 1 }),
      { ...record({ correlationId: 'o2', sessionKey: 'agent:main:main', channel: 'internal', usage: usage(20, 2), at: STARTED + 2 }), run: 'job', jobId: 'digest' },
      { ...record({ correlationId: 'o3', sessionKey: 'agent:main:main', channel: 'internal', usage: usage(30, 3), at: STARTED + 3 }), run: 'heartbeat' },
    ]);
    expect(await migrate(db.pool)).toContain('006-ledger-ids');
    // A replica of this version writes beside an older one that still writes the old way.
    const sink = new PgLedgerSink({ pool: db.pool, logger: silentLogger(), replicaId: 'new', startedAt: STARTED });
    sink.append(record({ correlationId: 'n1', sessionKey: key, usage: usage(40, 4), at: STARTED + 4 }));
    sink.append({ ...record({ correlationId: 'n2', sessionKey: 'agent:main:main', channel: 'internal', usage: usage(50, 5), at: STARTED + 5 }), run: 'job', jobId: 'digest' });
    await sink.flush();
    await writeAsOldReplica(db.pool, [record({ correlationId: 'o4', sessionKey: key, usage: usage(60, 6), at: STARTED + 6 })]);
    const ids = await db.pool.query<{ c: string; has_id: boolean }>("SELECT record->>'correlationId' AS c, record_id IS NOT NULL AS has_id FROM sb_ledger ORDER BY id");
    expect(ids.rows).toEqual([
      { c: 'o1', has_id: false }, { c: 'o2', has_id: false }, { c: 'o3', has_id: false },
      { c: 'n1', has_id: true }, { c: 'n2', has_id: true }, { c: 'o4', has_id: false },
    ]);
    const report = await sink.usage();
    expect(report.totals).toMatchObject({ llmCalls: 6, inputTokens: 210, outputTokens: 21 });
    expect(report.channels.telegram).toMatchObject({ llmCalls: 3, inputTokens: 110 });
    expect(report.channels.internal).toMatchObject({ llmCalls: 3, inputTokens: 100 });
    // The rows there were when it ran are filed under their job / the heartbeat; the newer replica's too.
    expect(report.jobs).toEqual({ digest: expect.objectContaining({ llmCalls: 2, inputTokens: 70, outputTokens: 7, totalTokens: 77 }) });
    expect(report.heartbeat).toMatchObject({ llmCalls: 1, inputTokens: 30, totalTokens: 33 });
    expect(await sink.keyTotals(key)).toMatchObject({ llmCalls: 3, inputTokens: 110, sessions: 1 });
    expect((await sink.timeline(key, 10)).map((r) => r.correlationId)).toEqual(['o1', 'n1', 'o4']);
    expect(await migrate(db.pool)).toEqual([]);
    await sink.close();
  });
});
