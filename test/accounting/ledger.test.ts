import { appendFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { TokenLedger } from '../../src/accounting/ledger.ts';
import { ledgerPath } from '../../src/accounting/accounting.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { COMPONENT_FIELDS, record, SPEC_FIELDS } from './records.ts';
import { useTempDir } from '../helpers/fixtures.ts';

describe('token ledger (JSONL)', () => {
  const tmp = useTempDir();
  let file: string;
  beforeEach(() => {
    file = ledgerPath(path.join(tmp.dir, 'data'));
  });

  const lines = () => readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);

  it('lives at <stateDir>/audit/turn-token-usage.jsonl', () => {
    expect(file).toBe(path.join(tmp.dir, 'data', 'audit', 'turn-token-usage.jsonl'));
  });

  it('writes one line per call with exactly the SPEC fields, without blocking the caller', async () => {
    const ledger = new TokenLedger({ file, logger: silentLogger() });
    const result = ledger.append(record({ correlationId: 'a' }));
    expect(result).toBeUndefined(); // append is synchronous and returns before any disk I/O
    expect(existsSync(file)).toBe(false);
    ledger.append(record({ correlationId: 'b', kind: 'compaction' }));
    ledger.append(record({ correlationId: 'c', kind: 'memory-flush', isEstimated: true }));
    await ledger.flush();
    const written = lines();
    expect(written.map((l) => [l.correlationId, l.kind, l.isEstimated])).toEqual([['a', 'turn', false], ['b', 'compaction', false], ['c', 'memory-flush', true]]);
    for (const line of written) {
      expect(Object.keys(line)).toEqual(SPEC_FIELDS);
      expect(Object.keys(line.estimatedInputTokensByComponent as object)).toEqual(COMPONENT_FIELDS);
    }
    expect(written[0]).toMatchObject({
      sessionKey: 'agent:main:main', sessionId: 'sid-1', channel: 'telegram', agentId: 'main', providerId: 'default', modelId: 'gpt-test',
      inputTokens: 100, outputTokens: 20, cacheReadTokens: 30, cacheWriteTokens: 5, timestamp: '2025-01-02T03:04:05.000Z',
    });
  });

  it('is read back by a new instance (restart): in order with scan, newest first with readBackwards', async () => {
    const first = new TokenLedger({ file, logger: silentLogger() });
    for (let i = 0; i < 5; i++) first.append(record({ correlationId: `c${i}`, sessionKey: i % 2 ? 'agent:main:odd' : 'agent:main:even' }));
    await first.flush();

    const second = new TokenLedger({ file, logger: silentLogger() });
    await second.open();
    const seen: string[] = [];
    expect(await second.scan((r) => seen.push(r.correlationId))).toBe(5);
    expect(seen).toEqual(['c0', 'c1', 'c2', 'c3', 'c4']);
    const even = await second.readBackwards((r) => r.sessionKey === 'agent:main:even', 2);
    expect(even.map((r) => r.correlationId)).toEqual(['c4', 'c2']);
    second.append(record({ correlationId: 'c5' }));
    expect((await second.readBackwards(() => true, 1)).map((r) => r.correlationId)).toEqual(['c5']); // pending records are flushed first
  });

  it('reads backwards across chunk boundaries and finds matches anywhere in a large file', async () => {
    const ledger = new TokenLedger({ file, logger: silentLogger() });
    for (let i = 0; i < 800; i++) ledger.append(record({ correlationId: `n${i}`, sessionKey: i === 3 ? 'agent:main:rare' : 'agent:main:main' }));
    await ledger.flush();
    expect(readFileSync(file).length).toBeGreaterThan(3 * 64 * 1024);
    const all = await ledger.readBackwards(() => true, 10_000);
    expect(all).toHaveLength(800);
    expect(all[0]?.correlationId).toBe('n799');
    expect(all.at(-1)?.correlationId).toBe('n0');
    const rare = await ledger.readBackwards((r) => r.sessionKey === 'agent:main:rare', 100, { contains: '"sessionKey":"agent:main:rare"' });
    expect(rare.map((r) => r.correlationId)).toEqual(['n3']);
  });

  it('skips a torn last line and starts the next record on a line of its own', async () => {
    const ledger = new TokenLedger({ file, logger: silentLogger() });
    ledger.append(record({ correlationId: 'whole' }));
    await ledger.flush();
    appendFileSync(file, '{"correlationId":"torn","sessionKey":"agent:ma'); // crash mid-write

    const after = new TokenLedger({ file, logger: silentLogger() });
    await after.open();
    after.append(record({ correlationId: 'next' }));
    await after.flush();
    const ids: string[] = [];
    await after.scan((r) => ids.push(r.correlationId));
    expect(ids).toEqual(['whole', 'next']);
    expect((await after.readBackwards(() => true, 10)).map((r) => r.correlationId)).toEqual(['next', 'whole']);
  });

  it('reads an absent ledger as empty', async () => {
    const ledger = new TokenLedger({ file, logger: silentLogger() });
    expect(await ledger.scan(() => undefined)).toBe(0);
    expect(await ledger.readBackwards(() => true, 10)).toEqual([]);
  });

  it('keeps records queued when the disk refuses them, and writes them once it can', async () => {
    writeFileSync(path.join(tmp.dir, 'blocker'), 'a file where the audit folder should be');
    const blocked = path.join(tmp.dir, 'blocker', 'audit', 'turn-token-usage.jsonl');
    const ledger = new TokenLedger({ file: blocked, logger: silentLogger() });
    ledger.append(record({ correlationId: 'kept' }));
    await ledger.flush(); // fails, logged, not thrown
    expect(existsSync(blocked)).toBe(false);
    rmSync(path.join(tmp.dir, 'blocker'));
    ledger.append(record({ correlationId: 'later' }));
    await ledger.flush();
    expect(readFileSync(blocked, 'utf8').trim().split('\n').map((l) => JSON.parse(l).correlationId)).toEqual(['kept', 'later']);
  });
});
