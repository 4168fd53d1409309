import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KeyFilter } from '../../src/accounting/ledger-archive.ts';
import { TokenLedger } from '../../src/accounting/ledger.ts';
import { ledgerPath } from '../../src/accounting/accounting.ts';
import { AppendOnlyFile } from '../../src/core/append-only-file.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { record } from './records.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const nextTurn = () => new Promise((resolve) => { setImmediate(resolve); });

describe('token ledger writes', () => {
  const tmp = useTempDir();
  let file: string;
  beforeEach(() => {
    file = ledgerPath(path.join(tmp.dir, 'data'));
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('puts the records of one turn of the event loop on disk in one write, in order, by the next turn', async () => {
    const ledger = new TokenLedger({ file, logger: silentLogger() });
    await ledger.open();
    const writes = vi.spyOn(AppendOnlyFile.prototype, 'append');
    ledger.append(record({ correlationId: 'a' }));
    await Promise.resolve();
    ledger.append(record({ correlationId: 'b' }));
    ledger.append(record({ correlationId: 'c' }));
    expect(writes).not.toHaveBeenCalled();
    expect(ledger.settled).toBe(false);
    await nextTurn();
    await nextTurn();
    expect(writes).toHaveBeenCalledTimes(1);
    expect(readFileSync(file, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { correlationId: string }).correlationId)).toEqual(['a', 'b', 'c']);
    expect(ledger.settled).toBe(true);
    ledger.append(record({ correlationId: 'd' }));
    await ledger.flush();
    expect(writes).toHaveBeenCalledTimes(2);
    expect(readFileSync(file, 'utf8').trim().split('\n')).toHaveLength(4);
  });
});

describe('ledger key filter', () => {
  /** The three bits SHA-1 gives a key (first three 32-bit words, modulo 65536), computed here from the digest. */
  const bitsOf = (key: string) => {
    const digest = createHash('sha1').update(key).digest();
    return [0, 1, 2].map((i) => digest.readUInt32BE(i * 4) % 65_536);
  };
  const setBits = (filter: KeyFilter) => {
    const set: number[] = [];
    filter.bits.forEach((byte, i) => { for (let b = 0; b < 8; b++) if (byte & (1 << b)) set.push(i * 8 + b); });
    return set;
  };

  it('sets the same bits for a key added once or many times', () => {
    const once = new KeyFilter();
    once.add('agent:main:telegram:direct:42');
    const often = new KeyFilter();
    for (let i = 0; i < 50; i++) often.add('agent:main:telegram:direct:42');
    expect(setBits(often)).toEqual(setBits(once));
    expect(setBits(once)).toEqual([...new Set(bitsOf('agent:main:telegram:direct:42'))].sort((a, b) => a - b));
  });

  it('has every key added, also past the keys it remembers, and keeps its bits through base64', () => {
    const filter = new KeyFilter();
    const keys = Array.from({ length: 5000 }, (_, i) => `agent:main:webchat:direct:peer-${i}`);
    for (const key of keys) filter.add(key);
    for (const key of keys) filter.add(key);
    const expected = new Uint8Array(8192);
    for (const key of keys) for (const bit of bitsOf(key)) expected[bit >> 3]! |= 1 << (bit & 7);
    expect(Buffer.from(filter.bits).equals(Buffer.from(expected))).toBe(true);
    const copy = KeyFilter.fromBase64(filter.toBase64());
    expect(keys.every((k) => copy?.mayHave(k))).toBe(true);
  });
});
