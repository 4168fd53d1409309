// The split of an old oversized ledger into archives (at start): every record once, in order, in parts of about the
// usual size cut at line ends, blank lines left out, a torn last line ended; each part's key filter knows its keys.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { splitIntoArchives } from '../../src/accounting/ledger-archive.ts';
import { useTempDir } from '../helpers/fixtures.ts';
import { record } from './records.ts';

const tmp = useTempDir();

it('copies every non-blank line once, in order, into parts of about partBytes, and each part\'s filter holds its keys', async () => {
  const dir = path.join(tmp.dir, 'audit');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'turn-token-usage.jsonl');
  const keyOf = (i: number) => (i === 5 ? 'agent:main:webchat:direct:a"quoted"one' : `agent:main:telegram:direct:${i % 17}`);
  const lines = Array.from({ length: 3000 }, (_, i) => JSON.stringify(record({ correlationId: `c${i}`, sessionKey: keyOf(i) })));
  // Blank and white-space lines between records, and a last record cut short (no line break).
  const text = lines.map((l, i) => (i % 500 === 7 ? `\n  \n${l}\n` : `${l}\n`)).join('').replace(/\n$/, '');
  writeFileSync(file, text);
  const partBytes = 64 * 1024;
  const parts = await splitIntoArchives(file, Date.UTC(2026, 0, 2), partBytes, new Set());
  expect(readdirSync(dir).filter((n) => n.endsWith('.part'))).toEqual([]);
  expect(parts.length).toBeGreaterThan(10);
  const contents = parts.map((p) => readFileSync(path.join(dir, p.archive.name), 'utf8'));
  expect(contents.join('')).toBe(lines.map((l) => `${l}\n`).join(''));
  const longest = Math.max(...lines.map((l) => Buffer.byteLength(l) + 1));
  for (const c of contents) expect(Buffer.byteLength(c)).toBeLessThanOrEqual(partBytes + longest);
  for (const [i, p] of parts.entries()) {
    for (const line of contents[i]!.trim().split('\n')) expect(p.keys.mayHave((JSON.parse(line) as { sessionKey: string }).sessionKey)).toBe(true);
  }
  expect(parts.map((p) => p.archive.name)).toEqual([...parts.map((p) => p.archive.name)].sort());
});

it('an empty or blank file gives no parts', async () => {
  const dir = path.join(tmp.dir, 'blank');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'turn-token-usage.jsonl');
  writeFileSync(file, '\n \n\t\n');
  expect(await splitIntoArchives(file, Date.UTC(2026, 0, 2), 1024, new Set())).toEqual([]);
});
