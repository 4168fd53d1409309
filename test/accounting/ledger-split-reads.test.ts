// Issue 32: a session's timeline while an old oversized ledger is split into archives at start. The split takes
// seconds on a big ledger; a timeline must not wait for it (it read 148 MB in 3.7 s on the first start), and must
// still see every record once: the queued ones, the file being split, and after the split, the archives.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { TokenLedger } from '../../src/accounting/ledger.ts';
import type { LedgerRecord } from '../../src/accounting/ledger-record.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { useTempDir } from '../helpers/fixtures.ts';
import { record } from './records.ts';

const tmp = useTempDir();
const KEY = 'agent:main:telegram:direct:7';
const keyOf = (i: number) => `agent:main:telegram:direct:${i % 13}`;
const ledgers: TokenLedger[] = [];
afterEach(async () => { for (const l of ledgers.splice(0)) await l.close(); });

it('a timeline during the split of an old oversized ledger answers before the split ends: queued records first, then the newest of the file, each once', async () => {
  const file = path.join(tmp.dir, 'audit', 'turn-token-usage.jsonl');
  mkdirSync(path.dirname(file), { recursive: true });
  const count = 60_000;
  writeFileSync(file, Array.from({ length: count }, (_, i) => `${JSON.stringify(record({ correlationId: `c${i}`, sessionKey: keyOf(i) }))}\n`).join(''));
  const ledger = new TokenLedger({ file, logger: silentLogger(), rotation: { rotate: 'size', maxFileBytes: 256 * 1024, retentionDays: 0 } });
  ledgers.push(ledger);
  await ledger.open();
  // A new record starts the writer, which first splits the file (far over the size) into archives.
  ledger.append(record({ correlationId: 'new', sessionKey: KEY }));
  const ours = (r: LedgerRecord) => r.sessionKey === KEY;
  const expected = ['new', ...Array.from({ length: count }, (_, i) => i).filter((i) => keyOf(i) === KEY).slice(-20).reverse().map((i) => `c${i}`)];
  const during = await ledger.readBackwards(ours, 21, { sessionKey: KEY });
  // Answered while the writer was still busy with the split (it used to wait for it).
  expect(ledger.settled).toBe(false);
  expect(ledger.rotations).toBe(0);
  expect(during.map((r) => r.correlationId)).toEqual(expected);
  // Every record of the key, across the 1 MiB chunks the file is read backwards in (lines cut at their edges), with
  // and without the byte search for the key.
  const everyId = ['new', ...Array.from({ length: count }, (_, i) => i).filter((i) => keyOf(i) === KEY).reverse().map((i) => `c${i}`)];
  const contains = `"sessionKey":${JSON.stringify(KEY)}`;
  expect((await ledger.readBackwards(ours, count, { sessionKey: KEY, contains })).map((r) => r.correlationId)).toEqual(everyId);
  expect((await ledger.readBackwards(() => true, count + 1)).map((r) => r.correlationId))
    .toEqual(['new', ...Array.from({ length: count }, (_, i) => `c${count - 1 - i}`)]);
  await ledger.flush();
  expect(ledger.rotations).toBe(1);
  const after = await ledger.readBackwards(ours, 21, { sessionKey: KEY });
  expect(after.map((r) => r.correlationId)).toEqual(expected);
  // The whole timeline of the key, once each, across the split archives and the new active file.
  const all = await ledger.readBackwards(ours, count, { sessionKey: KEY });
  expect(all).toHaveLength(Array.from({ length: count }, (_, i) => i).filter((i) => keyOf(i) === KEY).length + 1);
});
