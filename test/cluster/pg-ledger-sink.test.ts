import { afterAll, beforeAll, expect, it } from 'vitest';
import { Accounting } from '../../src/accounting/accounting.ts';
import { emptyTotals } from '../../src/accounting/runtime-totals.ts';
import { PgLedgerSink } from '../../src/cluster/pg-ledger-sink.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { llmCall, record } from '../accounting/records.ts';
import { tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();
const STARTED = Date.UTC(2025, 0, 1);
const sources = { activeSessions: () => 0, evictions: () => 0, queueDepth: () => 0, runningTurns: () => 0, messages: () => ({}) };
const usage = (input: number, output: number, cacheRead = 0, cacheWrite = 0) => ({ inputTokens: input, outputTokens: output, cacheReadTokens: cacheRead, cacheWriteTokens: cacheWrite });

describePg('the ledger on PostgreSQL', () => {
  let a: PgLedgerSink;
  let b: PgLedgerSink;
  beforeAll(() => {
    a = new PgLedgerSink({ pool: db.pool, logger: silentLogger(), replicaId: 'a', startedAt: STARTED, maxBatch: 64 });
    b = new PgLedgerSink({ pool: db.pool, logger: silentLogger(), replicaId: 'b', startedAt: STARTED });
  });

  it('an empty ledger: since is the process start, nothing summed', async () => {
    expect(await a.usage()).toEqual({ since: new Date(STARTED).toISOString(), totals: expect.objectContaining({ totalTokens: 0, llmCalls: 0 }), channels: {}, jobs: {}, heartbeat: emptyTotals() });
    expect(await a.providerUsage()).toEqual([]);
    expect(await a.recent(10)).toEqual([]);
  });

  it('two replicas write in the background; every figure is the sum of both, read the same from either', async () => {
    // 300 calls on replica a (telegram, 2 sessions of one key), 100 on b (slack, another model, estimated).
    for (let i = 0; i < 300; i++) {
      a.append(record({ correlationId: `a${i}`, sessionKey: 'agent:main:main', sessionId: i < 100 ? 'old' : 'new', usage: usage(10, 2, 1, 0), at: STARTED + 1000 + i }));
    }
    for (let i = 0; i < 100; i++) {
      b.append(record({ correlationId: `b${i}`, sessionKey: 'agent:main:slack:channel:c', channel: 'slack', modelId: 'gpt-b', isEstimated: true, usage: usage(5, 5, 0, 3), at: STARTED + 500 + i }));
    }
    expect(a.queued + b.queued).toBeGreaterThan(0);
    await Promise.all([a.flush(), b.flush()]);
    expect(a.queued + b.queued).toBe(0);
    for (const sink of [a, b]) {
      const report = await sink.usage();
      expect(report.since).toBe(new Date(STARTED + 500).toISOString());
      expect(report.totals).toEqual({ inputTokens: 3500, outputTokens: 1100, cacheReadTokens: 300, cacheWriteTokens: 300, totalTokens: 5200, llmCalls: 400, estimatedCalls: 100 });
      expect(report.channels.telegram).toEqual({ inputTokens: 3000, outputTokens: 600, cacheReadTokens: 300, cacheWriteTokens: 0, totalTokens: 3900, llmCalls: 300, estimatedCalls: 0 });
      expect(report.channels.slack?.totalTokens).toBe(1300);
      expect(await sink.providerUsage()).toEqual([
        { providerId: 'default', modelId: 'gpt-b', requests: 100, retries: 0, errors: 0, inputTokens: 500, outputTokens: 500, cacheReadTokens: 0, cacheWriteTokens: 300 },
        { providerId: 'default', modelId: 'gpt-test', requests: 300, retries: 0, errors: 0, inputTokens: 3000, outputTokens: 600, cacheReadTokens: 300, cacheWriteTokens: 0 },
      ]);
    }
    const timeline = await b.timeline('agent:main:main', 5);
    expect(timeline.map((r) => r.correlationId)).toEqual(['a295', 'a296', 'a297', 'a298', 'a299']);
    expect(timeline[4]).toEqual(record({ correlationId: 'a299', sessionKey: 'agent:main:main', sessionId: 'new', usage: usage(10, 2, 1, 0), at: STARTED + 1299 }));
    expect(await b.keyTotals('agent:main:main')).toEqual({ inputTokens: 3000, outputTokens: 600, cacheReadTokens: 300, cacheWriteTokens: 0, totalTokens: 3900, llmCalls: 300, estimatedCalls: 0, sessions: 2 });
    expect((await b.sessionTotals('agent:main:main', 'old')).llmCalls).toBe(100);
    expect((await b.sessionTotals('agent:main:slack:channel:c', 'sid-1')).estimatedCalls).toBe(100);
    expect(await b.keyTotals('agent:none')).toMatchObject({ llmCalls: 0, sessions: 0 });
    const rows = await db.pool.query<{ replica_id: string; n: string }>('SELECT replica_id, count(*) AS n FROM sb_ledger GROUP BY replica_id ORDER BY replica_id');
    expect(rows.rows).toEqual([{ replica_id: 'a', n: '300' }, { replica_id: 'b', n: '100' }]);
  });

  it('a write the database refuses stays queued and goes in once it works again (turns never wait)', async () => {
    await db.pool.query('ALTER TABLE sb_ledger RENAME TO sb_ledger_away');
    try {
      a.append(record({ correlationId: 'late', sessionKey: 'agent:main:late' }));
      await a.flush(); // the attempt failed (and was logged); the record waits
      expect(a.queued).toBe(1);
    } finally {
      await db.pool.query('ALTER TABLE sb_ledger_away RENAME TO sb_ledger');
    }
    await a.flush();
    expect(a.queued).toBe(0);
    expect((await a.timeline('agent:main:late', 10)).map((r) => r.correlationId)).toEqual(['late']);
    // The sums were rolled back with the failed insert, and counted once with the one that worked.
    expect((await a.usage()).totals.llmCalls).toBe(401);
  });

  it('Accounting with the shared ledger: routes read SQL; retries and errors are this process\'s; close flushes', async () => {
    const tmp = tempDir();
    try {
      const sink = new PgLedgerSink({ pool: db.pool, logger: silentLogger(), replicaId: 'c', startedAt: STARTED });
      const accounting = new Accounting({ stateDir: tmp.dir, logger: silentLogger(), startedAt: STARTED, metrics: sources, ledgerStore: sink });
      await accounting.open();
      accounting.observer.onLlmCall?.(llmCall({ correlationId: 'c1', sessionKey: 'agent:main:c', retries: 2, at: STARTED + 5000 }));
      accounting.observer.onLlmCall?.(llmCall({ correlationId: 'c2', sessionKey: 'agent:main:c', modelId: 'gpt-failing', error: 'PROVIDER_FAILED', usage: usage(0, 0) }));
      await accounting.close();
      expect(sink.queued).toBe(0);
      const providers = await accounting.providerUsage();
      expect(providers.find((p) => p.modelId === 'gpt-test')).toMatchObject({ requests: 302, retries: 2, errors: 0 });
      expect(providers.find((p) => p.modelId === 'gpt-failing')).toEqual({
        providerId: 'default', modelId: 'gpt-failing', requests: 1, retries: 0, errors: 1, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0,
      });
      expect((await accounting.recentTurns(2)).map((r) => r.correlationId)).toEqual(['c1', 'late']);
      expect((await accounting.timeline('agent:main:c', 10)).map((r) => r.correlationId)).toEqual(['c1']);
      expect((await accounting.usage()).totals.llmCalls).toBe(402);
      expect(await accounting.keyTotals('agent:main:c')).toMatchObject({ llmCalls: 1, totalTokens: 155, sessions: 1 });
      expect(await accounting.sessionTotals('agent:main:c', 'sid-1')).toMatchObject({ llmCalls: 1 });
      // Nothing went to the local JSONL ledger.
      expect(accounting.ledger.position().offset).toBe(0);
    } finally {
      tmp.remove();
    }
  });

  it('prune deletes records older than the retention; the sums keep them', async () => {
    const before = (await a.usage()).totals;
    expect(await a.prune(new Date(STARTED + 600))).toBe(100); // b's records, at STARTED + 500…599
    expect(await a.prune(new Date(STARTED + 600))).toBe(0);
    expect((await a.usage()).totals).toEqual(before);
    expect((await a.keyTotals('agent:main:slack:channel:c')).llmCalls).toBe(0);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
  });
});
