import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Accounting, ledgerPath } from '../../src/accounting/accounting.ts';
import { TokenLedger, type LedgerRotation } from '../../src/accounting/ledger.ts';
import type { LedgerRecord } from '../../src/accounting/ledger-record.ts';
import { snapshotPath } from '../../src/accounting/ledger-snapshot.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { parsePrometheus, sumOf } from '../http/prometheus.ts';
import { llmCall, record } from './records.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const sources = { activeSessions: () => 0, evictions: () => 0, queueDepth: () => 0, runningTurns: () => 0, messages: () => ({}) };
const T0 = Date.UTC(2026, 0, 10, 12);

/** The i-th call of a varied history: keys, channels, models, kinds and sessions that change over time. */
function call(i: number) {
  return llmCall({
    correlationId: `c${i}`, sessionKey: `agent:main:telegram:direct:${i % 37}`, sessionId: `sid-${i % 37}-${Math.floor(i / 400)}`,
    channel: (['telegram', 'discord', 'api'] as const)[i % 3], modelId: i % 5 ? 'gpt-test' : 'gpt-other', kind: i % 11 ? 'turn' : 'compaction',
    isEstimated: i % 7 === 0, usage: { inputTokens: 100 + (i % 13), outputTokens: 20 + (i % 5), cacheReadTokens: i % 4, cacheWriteTokens: i % 3 },
    at: T0 + i * 1000,
  });
}

/** What a full read of these records gives: the reference the restored figures must equal. */
async function figures(accounting: Accounting) {
  return {
    usage: accounting.totals.snapshot(),
    keys: Array.from({ length: 37 }, (_, k) => accounting.totals.ofKey(`agent:main:telegram:direct:${k}`)),
    latest: Array.from({ length: 37 }, (_, k) => accounting.totals.ofSession(`agent:main:telegram:direct:${k}`, `sid-${k}-2`)),
    providers: accounting.providers.usage(),
    recent: accounting.providers.recent(20).map((r) => r.correlationId),
    tokens: sumOf(parsePrometheus(await accounting.metrics.text()).samples, 'switchboard_tokens_total'),
    calls: sumOf(parsePrometheus(await accounting.metrics.text()).samples, 'switchboard_llm_calls_total'),
  };
}

describe('token ledger rotation, archives and snapshot', () => {
  const tmp = useTempDir('switchboard-ledger-rotation-');
  let stateDir: string;
  let now: number;
  const opened: Accounting[] = [];
  beforeEach(() => {
    stateDir = path.join(tmp.dir, 'data');
    now = T0;
  });
  afterEach(async () => {
    for (const a of opened.splice(0)) await a.close().catch(() => undefined);
    vi.restoreAllMocks();
  });

  const start = async (ledger: LedgerRotation = { rotate: 'size', maxFileBytes: 20_000, retentionDays: 0 }) => {
    const accounting = new Accounting({ stateDir, logger: silentLogger(), startedAt: T0, metrics: sources, ledger, now: () => now });
    opened.push(accounting);
    await accounting.open();
    return accounting;
  };
  const audit = () => readdirSync(path.join(stateDir, 'audit')).sort();
  /** Calls over time: the writer takes what is queued every 20 calls. */
  const feed = async (accounting: Accounting, from: number, to: number): Promise<void> => {
    for (let i = from; i < to; i++) {
      now = T0 + i * 1000;
      accounting.observer.onLlmCall?.(call(i));
      if (i % 20 === 19) await accounting.flush();
    }
    await accounting.flush();
  };

  it('rotates by size into compressed archives that hold every record, once each, in order', async () => {
    const accounting = await start();
    await feed(accounting, 0, 300);
    await accounting.close();
    const archives = audit().filter((n) => n.endsWith('.jsonl.gz'));
    expect(archives.length).toBeGreaterThanOrEqual(4);
    expect(audit().filter((n) => n.endsWith('.jsonl') && n !== 'turn-token-usage.jsonl')).toEqual([]); // all compressed
    const ids = [
      ...archives.flatMap((n) => gunzipSync(readFileSync(path.join(stateDir, 'audit', n))).toString().trim().split('\n')),
      ...readFileSync(ledgerPath(stateDir), 'utf8').trim().split('\n'),
    ].filter(Boolean).map((l) => (JSON.parse(l) as LedgerRecord).correlationId);
    expect(ids).toEqual(Array.from({ length: 300 }, (_, i) => `c${i}`));
    for (const archive of archives) expect(archive).toMatch(/^turn-token-usage\.2026-01-10T\d{2}-\d{2}-\d{2}-\d{3}Z(-\d+)?\.jsonl\.gz$/);
  });

  it('restores every figure from the snapshot at start, without reading the archives', async () => {
    const first = await start();
    await feed(first, 0, 1200);
    await first.flush();
    const reference = await figures(first);
    await first.close();
    expect(audit()).toContain('turn-token-usage.snapshot.json');

    const archiveReads = vi.spyOn(TokenLedger.prototype, 'scanArchive');
    const second = await start();
    expect(archiveReads).not.toHaveBeenCalled();
    expect(await figures(second)).toEqual(reference);
    expect(reference.usage.totals.llmCalls).toBe(1200);
    expect(reference.recent[0]).toBe('c1199');

    // It goes on from there, and a third start (after a crash: no snapshot since) reads only the new records.
    await feed(second, 1200, 1500);
    await second.flush();
    const afterMore = await figures(second);
    // The crash comes after the snapshot a rotation asks for is on disk (a save under way when the third start
    // reads the file would make it read everything again, in the background).
    await vi.waitFor(() => {
      const saved = JSON.parse(readFileSync(snapshotPath(ledgerPath(stateDir)), 'utf8')) as { archives: { name: string }[] };
      const listed = new Set(saved.archives.map((a) => a.name.replace(/\.gz$/, '')));
      expect(second.ledger.archives.filter((a) => !listed.has(a.name.replace(/\.gz$/, '')))).toEqual([]);
    });
    const third = await start();
    expect(archiveReads).not.toHaveBeenCalled();
    expect(await figures(third)).toEqual(afterMore);
  });

  it('reads an old ledger without a snapshot in the background: start-up goes on, the figures come whole', async () => {
    mkdirSync(path.join(stateDir, 'audit'), { recursive: true });
    const records = Array.from({ length: 20_000 }, (_, i) => record(call(i)));
    writeFileSync(ledgerPath(stateDir), records.map((r) => `${JSON.stringify(r)}\n`).join(''));
    const started = performance.now();
    const accounting = await start({ rotate: 'size', maxFileBytes: 64 * 1024 * 1024, retentionDays: 0 });
    const openMs = performance.now() - started;
    let read = false;
    void accounting.ready.then(() => { read = true; });
    expect(read).toBe(false);
    // New calls meanwhile count on top, and stay the newest.
    now = T0 + 30_000_000;
    accounting.observer.onLlmCall?.(llmCall({ correlationId: 'live', sessionKey: 'agent:main:telegram:direct:1', sessionId: 'sid-live', at: now }));
    await accounting.ready;
    const readMs = performance.now() - started;
    // Start-up went on at once; reading the 20k records took several times as long.
    expect(openMs).toBeLessThan(readMs / 3);
    const usage = accounting.totals.snapshot();
    expect(usage.totals.llmCalls).toBe(20_001);
    const tokensOf = (r: LedgerRecord) => r.inputTokens + r.outputTokens + r.cacheReadTokens + r.cacheWriteTokens;
    expect(usage.totals.totalTokens).toBe(records.reduce((n, r) => n + tokensOf(r), 0) + tokensOf(record()));
    expect(usage.since).toBe(records[0]!.timestamp);
    expect(accounting.providers.recent(3).map((r) => r.correlationId)).toEqual(['live', 'c19999', 'c19998']);
    expect(accounting.totals.ofSession('agent:main:telegram:direct:1', 'sid-live').llmCalls).toBe(1);
    const reference = await figures(accounting);
    await accounting.close();
    const again = await start();
    expect(await figures(again)).toEqual(reference);
  });

  it('splits an old oversized ledger into archives of the usual size once it is read, for fast timelines', async () => {
    mkdirSync(path.join(stateDir, 'audit'), { recursive: true });
    const records = Array.from({ length: 2000 }, (_, i) => record(call(i)));
    writeFileSync(ledgerPath(stateDir), records.map((r) => `${JSON.stringify(r)}\n`).join(''));
    const accounting = await start({ rotate: 'size', maxFileBytes: 64 * 1024, retentionDays: 0 });
    await accounting.ready;
    await accounting.flush(); // the rotation waited for the history to be read
    await accounting.close();
    const archives = audit().filter((n) => n.endsWith('.jsonl.gz'));
    expect(archives.length).toBeGreaterThanOrEqual(10);
    const parts = archives.map((n) => gunzipSync(readFileSync(path.join(stateDir, 'audit', n))).toString());
    for (const part of parts) expect(Buffer.byteLength(part)).toBeLessThan(64 * 1024 + 1000);
    expect(parts.join('').trim().split('\n').map((l) => (JSON.parse(l) as LedgerRecord).correlationId)).toEqual(records.map((r) => r.correlationId));
    const again = await start({ rotate: 'size', maxFileBytes: 64 * 1024, retentionDays: 0 });
    expect(again.totals.snapshot().totals.llmCalls).toBe(2000);
    const key = 'agent:main:telegram:direct:3';
    const mayHave = again.ledger.archives.filter((a) => a.keys?.mayHave('agent:main:telegram:direct:unknown'));
    expect(mayHave.length).toBeLessThanOrEqual(1); // false positives only
    const newest = Array.from({ length: 2000 }, (_, i) => i).filter((i) => i % 37 === 3).slice(-5).reverse().map((i) => `c${i}`);
    expect((await again.ledger.readBackwards((r) => r.sessionKey === key, 5, { sessionKey: key })).map((r) => r.correlationId)).toEqual(newest);
  });

  it('reads everything again when the snapshot does not match the files (a crash right after a rotation)', async () => {
    const first = await start();
    await feed(first, 0, 600);
    await first.flush();
    const reference = await figures(first);
    await first.close();
    // An older snapshot, from before the last rotations.
    const snapshot = JSON.parse(readFileSync(snapshotPath(ledgerPath(stateDir)), 'utf8')) as { archives: unknown[] };
    snapshot.archives = snapshot.archives.slice(0, 2);
    writeFileSync(snapshotPath(ledgerPath(stateDir)), JSON.stringify(snapshot));
    const second = await start();
    await second.ready;
    expect(await figures(second)).toEqual(reference);
  });

  it('finds a session timeline across archives, newest first, skipping archives without the key', async () => {
    const accounting = await start();
    await feed(accounting, 0, 400);
    await accounting.flush();
    await accounting.close();
    const again = await start();
    const key = 'agent:main:telegram:direct:5';
    const turns = await again.ledger.readBackwards((r) => r.sessionKey === key, 100, { contains: `"sessionKey":${JSON.stringify(key)}`, sessionKey: key });
    expect(turns.map((r) => r.correlationId)).toEqual(Array.from({ length: 400 }, (_, i) => i).filter((i) => i % 37 === 5).reverse().map((i) => `c${i}`));
    // An archive that cannot hold the key is never opened: a broken one does not matter.
    const other = 'agent:main:telegram:direct:unknown';
    const archive = again.ledger.archives.find((a) => a.keys && !a.keys.mayHave(other));
    expect(archive).toBeDefined();
    writeFileSync(path.join(stateDir, 'audit', archive!.name), 'not gzip');
    expect(await again.ledger.readBackwards((r) => r.sessionKey === other, 10, { sessionKey: other })).toEqual([]);
  });

  it('rotates daily at UTC midnight when asked, and deletes archives past the retention, totals kept', async () => {
    const accounting = await start({ rotate: 'daily', maxFileBytes: 64 * 1024 * 1024, retentionDays: 2 });
    for (let day = 0; day < 5; day++) {
      now = Date.UTC(2026, 0, 10 + day, 23, 0);
      accounting.observer.onLlmCall?.(llmCall({ correlationId: `d${day}`, at: now }));
      await accounting.flush();
    }
    await accounting.close(); // compressions done
    const reopened = await start({ rotate: 'daily', maxFileBytes: 64 * 1024 * 1024, retentionDays: 2 });
    const archives = audit().filter((n) => n.endsWith('.jsonl.gz'));
    // Rotated at 23:00 on days 11..14; on day 14 at 23:00 the one of day 11 is more than two days old.
    expect(archives.map((n) => n.slice(17, 27))).toEqual(['2026-01-12', '2026-01-13', '2026-01-14']);
    expect(reopened.totals.snapshot().totals.llmCalls).toBe(5);
  });
});
