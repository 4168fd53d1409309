import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PgLedgerSink } from '../../src/cluster/pg-ledger-sink.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { record } from '../accounting/records.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();
const STARTED = Date.UTC(2025, 0, 1);
const usage = (input: number, output: number) => ({ inputTokens: input, outputTokens: output, cacheReadTokens: 0, cacheWriteTokens: 0 });

/**
 * The pool, but the next `lost` ledger writes (one statement each) commit and then fail as a dropped connection
 * does after the statement reached the server: the acknowledgement is lost, the writer cannot tell it committed.
 */
function losingAcks(pool: pg.Pool, lost: { count: number }): pg.Pool {
  const query = async (...args: unknown[]) => {
    const result = await (pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
    if (typeof args[0] === 'string' && args[0].includes('INSERT INTO sb_ledger ') && lost.count > 0) {
      lost.count--;
      throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
    }
    return result;
  };
  return { query, connect: pool.connect.bind(pool) } as unknown as pg.Pool;
}

describePg('ledger rows are idempotent (issue 31)', () => {
  const lost = { count: 0 };
  let sink: PgLedgerSink;
  beforeAll(() => {
    sink = new PgLedgerSink({ pool: losingAcks(db.pool, lost), logger: silentLogger(), replicaId: 'r1', startedAt: STARTED });
  });
  afterAll(async () => {
    await sink?.close();
  });

  it('a batch whose commit acknowledgement is lost is retried and counted once (and what came meanwhile once)', async () => {
    lost.count = 2;
    for (let i = 0; i < 3; i++) sink.append(record({ correlationId: `c${i}`, sessionKey: 'agent:main:lost', usage: usage(10, 1), at: STARTED + i }));
    // The write, and flush's own retry of it: both committed, both seen as a dropped connection; the batch stays queued.
    await sink.flush();
    expect(sink.queued).toBe(3);
    expect(lost.count).toBe(0);
    sink.append(record({ correlationId: 'c3', sessionKey: 'agent:main:lost', usage: usage(10, 1), at: STARTED + 3 }));
    await sink.flush(); // the retry: the same three records, and the new one
    expect(sink.queued).toBe(0);
    const rows = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM sb_ledger WHERE session_key = 'agent:main:lost'");
    expect(rows.rows[0]!.n).toBe(4);
    const report = await sink.usage();
    expect(report.totals).toMatchObject({ llmCalls: 4, inputTokens: 40, outputTokens: 4, totalTokens: 44 });
    expect(report.channels.telegram).toMatchObject({ llmCalls: 4, totalTokens: 44 });
    expect(await sink.keyTotals('agent:main:lost')).toMatchObject({ llmCalls: 4, totalTokens: 44, sessions: 1 });
    expect((await sink.providerUsage())[0]).toMatchObject({ requests: 4, inputTokens: 40 });
    expect((await sink.timeline('agent:main:lost', 10)).map((r) => r.correlationId)).toEqual(['c0', 'c1', 'c2', 'c3']);
  });
});
