import { expect, it } from 'vitest';
import { Accounting } from '../../src/accounting/accounting.ts';
import type { LedgerRecord } from '../../src/accounting/ledger-record.ts';
import { RuntimeTotals } from '../../src/accounting/runtime-totals.ts';
import { PgLedgerSink } from '../../src/cluster/pg-ledger-sink.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { record } from '../accounting/records.ts';
import { tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();
const STARTED = Date.UTC(2025, 0, 1);
const sources = { activeSessions: () => 0, evictions: () => 0, queueDepth: () => 0, runningTurns: () => 0, messages: () => ({}) };

/** Turns, two jobs' runs (one record with a jobId and no run mark), heartbeats (one also naming a job: the job's). */
function records(): LedgerRecord[] {
  const internal = { sessionKey: 'agent:main:main', channel: 'internal' as const };
  const u = (i: number) => ({ inputTokens: 10 + i, outputTokens: i, cacheReadTokens: i % 3, cacheWriteTokens: i % 2 });
  const list: LedgerRecord[] = [];
  for (let i = 0; i < 12; i++) {
    const base = record({ correlationId: `r${i}`, usage: u(i), at: STARTED + 1000 * (i + 1), isEstimated: i % 5 === 0 });
    if (i % 4 === 0) list.push(base);
    else if (i % 4 === 1) list.push({ ...base, ...internal, run: 'job', jobId: i < 6 ? 'weekly-report' : 'a-digest' });
    else if (i % 4 === 2) list.push({ ...base, ...internal, run: 'heartbeat', ...(i === 10 ? { jobId: 'weekly-report' } : {}) });
    else list.push({ ...base, ...internal, jobId: 'weekly-report' });
  }
  return list;
}

describePg('cluster /usage sums scheduled work apart, as one machine does (issue 31)', () => {
  it('jobs and heartbeat: the same report as the one-machine totals over the same records, across batches', async () => {
    const local = new RuntimeTotals(STARTED);
    const sink = new PgLedgerSink({ pool: db.pool, logger: silentLogger(), replicaId: 'r1', startedAt: STARTED, maxBatch: 5 });
    for (const r of records()) {
      local.add(r);
      sink.append(r);
    }
    await sink.flush();
    const expected = local.snapshot();
    expect(Object.keys(expected.jobs ?? {})).toEqual(['a-digest', 'weekly-report']);
    expect(expected.heartbeat?.llmCalls).toBe(2);
    const report = await sink.usage();
    expect(report).toEqual(expected);
    expect(Object.keys(report.jobs ?? {})).toEqual(['a-digest', 'weekly-report']);
    expect(Object.keys(report.channels)).toEqual(Object.keys(expected.channels));
    await sink.close();
  });

  it('through Accounting (what GET /usage answers in cluster mode): jobs and heartbeat are there', async () => {
    const tmp = tempDir();
    try {
      const sink = new PgLedgerSink({ pool: db.pool, logger: silentLogger(), replicaId: 'r2', startedAt: STARTED });
      const accounting = new Accounting({ stateDir: tmp.dir, logger: silentLogger(), startedAt: STARTED, metrics: sources, ledgerStore: sink });
      await accounting.open();
      const before = await accounting.usage();
      sink.append({ ...record({ correlationId: 'x', sessionKey: 'agent:main:main', channel: 'internal', at: STARTED + 99_000 }), run: 'job', jobId: 'a-digest' });
      await accounting.close();
      const after = await accounting.usage();
      expect(after.jobs?.['a-digest']?.llmCalls).toBe((before.jobs?.['a-digest']?.llmCalls ?? 0) + 1);
      expect(after.heartbeat).toEqual(before.heartbeat);
    } finally {
      tmp.remove();
    }
  });
});
