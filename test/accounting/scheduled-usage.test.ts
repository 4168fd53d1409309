import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Accounting, ledgerPath } from '../../src/accounting/accounting.ts';
import { ledgerRecordOf, parseLedgerLine } from '../../src/accounting/ledger-record.ts';
import { snapshotPath } from '../../src/accounting/ledger-snapshot.ts';
import { RuntimeTotals } from '../../src/accounting/runtime-totals.ts';
import { markScheduledRun, scopedEvent, type TurnScope } from '../../src/agent/turn-events.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { useTempDir } from '../helpers/fixtures.ts';
import { llmCall, record } from './records.ts';

// Issue 29: a job's LLM calls carry its id into the ledger, and `/usage` shows jobs and the heartbeat apart.

/** `llmCall()` as SPEC §4 writes it (see ledger-record.test.ts), without its closing brace. */
const SPEC_PART = '{"correlationId":"corr-1","sessionKey":"agent:main:main","sessionId":"sid-1","channel":"telegram","agentId":"main",'
  + '"providerId":"default","modelId":"gpt-test","inputTokens":100,"outputTokens":20,"cacheReadTokens":30,"cacheWriteTokens":5,'
  + '"estimatedInputTokensByComponent":{"system":50,"bootstrap":10,"tools":5,"history":30,"toolResults":0,"userInput":40},'
  + '"isEstimated":false,"kind":"turn","timestamp":"2025-01-02T03:04:05.000Z"';

describe('ledger records of scheduled work', () => {
  it('a job run\'s record: the SPEC fields unchanged, then "run":"job" and "jobId"', () => {
    const line = JSON.stringify(ledgerRecordOf(llmCall({ channel: 'internal', sessionKey: 'agent:main:job:standup', run: 'job', jobId: 'standup' })));
    expect(line).toBe('{"correlationId":"corr-1","sessionKey":"agent:main:job:standup","sessionId":"sid-1","channel":"internal","agentId":"main",'
      + '"providerId":"default","modelId":"gpt-test","inputTokens":100,"outputTokens":20,"cacheReadTokens":30,"cacheWriteTokens":5,'
      + '"estimatedInputTokensByComponent":{"system":50,"bootstrap":10,"tools":5,"history":30,"toolResults":0,"userInput":40},'
      + '"isEstimated":false,"kind":"turn","timestamp":"2025-01-02T03:04:05.000Z","run":"job","jobId":"standup"}');
  });

  it('a heartbeat\'s record ends with "run":"heartbeat"; the parent id comes before, the tool calls after', () => {
    expect(JSON.stringify(ledgerRecordOf(llmCall({ run: 'heartbeat' })))).toBe(`${SPEC_PART},"run":"heartbeat"}`);
    expect(JSON.stringify(ledgerRecordOf(llmCall({ parentCorrelationId: 'p-1', run: 'job', jobId: 'j', toolCalls: ['memory_write'] }))))
      .toBe(`${SPEC_PART},"parentCorrelationId":"p-1","run":"job","jobId":"j","toolCalls":["memory_write"]}`);
    expect(JSON.stringify(ledgerRecordOf(llmCall()))).toBe(`${SPEC_PART}}`);
  });

  it('reads the marks back, and drops foreign values of them while keeping the record', () => {
    expect(parseLedgerLine(`${SPEC_PART},"run":"job","jobId":"standup"}`)).toMatchObject({ run: 'job', jobId: 'standup' });
    const odd = parseLedgerLine(`${SPEC_PART},"run":"cron","jobId":7}`);
    expect(odd).toEqual(JSON.parse(`${SPEC_PART}}`));
  });

  it('turn events of a job\'s message carry the run and job id; a heartbeat\'s the run; others neither', () => {
    const scope = (): TurnScope => ({ correlationId: 'c', sessionKey: 'k', sessionId: 's', channel: 'internal', agentId: 'main' });
    const job = markScheduledRun(scope(), { kind: 'job', sessionKey: 'k', jobId: 'standup', runTokenBudget: 50_000 });
    expect(scopedEvent(job, { at: 1 })).toEqual({ ...scope(), run: 'job', jobId: 'standup', at: 1 });
    expect(scopedEvent(markScheduledRun(scope(), { kind: 'heartbeat', sessionKey: 'k' }), { at: 1 })).toEqual({ ...scope(), run: 'heartbeat', at: 1 });
    expect(scopedEvent(markScheduledRun(scope(), { kind: 'spawn', sessionKey: 'k', jobId: 'x' }), { at: 1 })).toEqual({ ...scope(), at: 1 });
    expect(scopedEvent(markScheduledRun(scope(), undefined), { at: 1 })).toEqual({ ...scope(), at: 1 });
  });
});

const TOTAL = 100 + 20 + 30 + 5;
const totals = (calls: number) => ({
  inputTokens: 100 * calls, outputTokens: 20 * calls, cacheReadTokens: 30 * calls, cacheWriteTokens: 5 * calls, totalTokens: TOTAL * calls, llmCalls: calls, estimatedCalls: 0,
});

describe('/usage: jobs and the heartbeat apart', () => {
  const tmp = useTempDir();
  const stateDir = () => path.join(tmp.dir, 'data');
  const open = async () => {
    const metrics = { activeSessions: () => 0, evictions: () => 0, queueDepth: () => 0, runningTurns: () => 0, messages: () => ({}) };
    const accounting = new Accounting({ stateDir: stateDir(), logger: silentLogger(), startedAt: Date.UTC(2025, 0, 1), metrics });
    await accounting.open();
    return accounting;
  };
  const feed = (accounting: Accounting) => {
    const job = (jobId: string, n: number) => llmCall({ correlationId: `${jobId}-${n}`, channel: 'internal', sessionKey: `agent:main:job:${jobId}`, run: 'job', jobId });
    accounting.observer.onLlmCall?.(job('standup', 1));
    accounting.observer.onLlmCall?.(job('standup', 2));
    accounting.observer.onLlmCall?.(job('backup', 1));
    accounting.observer.onLlmCall?.(llmCall({ correlationId: 'hb-1', channel: 'internal', run: 'heartbeat' }));
    accounting.observer.onLlmCall?.(llmCall({ correlationId: 'chat-1', channel: 'telegram' }));
    // A failed call has no record and counts nowhere.
    accounting.observer.onLlmCall?.(llmCall({ correlationId: 'hb-2', channel: 'internal', run: 'heartbeat', error: 'PROVIDER_FAILED' }));
  };
  const expected = {
    since: '2025-01-02T03:04:05.000Z',
    totals: totals(5),
    channels: { internal: totals(4), telegram: totals(1) },
    jobs: { backup: totals(1), standup: totals(2) },
    heartbeat: totals(1),
  };

  it('sums each job\'s calls and the heartbeat\'s apart from the chats (they stay in the totals and in channel internal)', async () => {
    const accounting = await open();
    feed(accounting);
    expect(await accounting.usage()).toEqual(expected);
    expect(Object.keys((await accounting.usage()).jobs ?? {})).toEqual(['backup', 'standup']);
    await accounting.close();
  });

  it('an empty ledger reports no jobs and a zero heartbeat', async () => {
    const accounting = await open();
    expect(await accounting.usage()).toMatchObject({ jobs: {}, heartbeat: totals(0) });
    await accounting.close();
  });

  it('the same after a restart, restored from the snapshot, which carries the sums', async () => {
    const first = await open();
    feed(first);
    await first.close();
    const saved = JSON.parse(readFileSync(snapshotPath(ledgerPath(stateDir())), 'utf8')) as { totals: { jobs: [string, unknown][]; heartbeat: unknown } };
    expect(Object.fromEntries(saved.totals.jobs)).toEqual(expected.jobs);
    expect(saved.totals.heartbeat).toEqual(expected.heartbeat);
    // The restart takes the sums from the snapshot (an edited sum shows), not from reading the ledger again.
    saved.totals.jobs = saved.totals.jobs.map(([id, t]) => [id, id === 'backup' ? totals(7) : t]);
    writeFileSync(snapshotPath(ledgerPath(stateDir())), JSON.stringify(saved));
    const second = await open();
    expect(await second.usage()).toEqual({ ...expected, jobs: { ...expected.jobs, backup: totals(7) } });
    await second.close();
  });

  it('the same after a restart that reads the ledger again (no snapshot), and after more runs', async () => {
    const first = await open();
    feed(first);
    await first.close();
    writeFileSync(snapshotPath(ledgerPath(stateDir())), 'not json');
    const second = await open();
    expect(await second.usage()).toEqual(expected);
    second.observer.onLlmCall?.(llmCall({ correlationId: 'standup-3', channel: 'internal', run: 'job', jobId: 'standup' }));
    expect((await second.usage()).jobs?.standup).toEqual(totals(3));
    await second.close();
  });

  it('a snapshot without the job and heartbeat sums (an older version\'s) is not used: the ledger is read again', async () => {
    const first = await open();
    feed(first);
    await first.close();
    const saved = JSON.parse(readFileSync(snapshotPath(ledgerPath(stateDir())), 'utf8')) as { totals: Record<string, unknown> };
    delete saved.totals.jobs;
    delete saved.totals.heartbeat;
    writeFileSync(snapshotPath(ledgerPath(stateDir())), JSON.stringify(saved));
    const second = await open();
    await second.ready;
    expect(await second.usage()).toEqual(expected);
    await second.close();
  });
});

describe('runtime totals', () => {
  it('history read in the background goes underneath the live job and heartbeat sums', () => {
    const live = new RuntimeTotals(0);
    live.add({ ...record({ correlationId: 'new' }), run: 'job', jobId: 'standup' });
    const older = new RuntimeTotals(0);
    older.add({ ...record({ correlationId: 'old-1' }), run: 'job', jobId: 'standup' });
    older.add({ ...record({ correlationId: 'old-2' }), run: 'job', jobId: 'gone' });
    older.add({ ...record({ correlationId: 'old-3' }), run: 'heartbeat' });
    live.absorbOlder(older);
    const report = live.snapshot();
    expect(report.jobs).toEqual({ gone: totals(1), standup: totals(2) });
    expect(report.heartbeat).toEqual(totals(1));
  });

  it('load replaces the sums with the saved ones', () => {
    const saved = new RuntimeTotals(0);
    saved.add({ ...record(), run: 'heartbeat' });
    const restored = new RuntimeTotals(0);
    restored.add({ ...record(), run: 'job', jobId: 'stale' });
    restored.load(saved.toJSON());
    expect(restored.snapshot()).toMatchObject({ jobs: {}, heartbeat: totals(1) });
  });
});
