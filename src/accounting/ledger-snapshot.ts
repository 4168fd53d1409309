import { open, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { tailHashOf, type LedgerPosition } from './ledger.ts';
import type { LedgerSummaryState } from './ledger-summary.ts';
import type { RuntimeTotalsState } from './runtime-totals.ts';

/**
 * `audit/turn-token-usage.snapshot.json`: everything start-up derives from the ledger (totals per channel
 * and key, sums per provider/model/kind/channel, the recent calls, the archives' key filters), up to a
 * position in the active file. A start reads it and only the records after that position, so start-up
 * time does not grow with history.
 */
export interface LedgerSnapshot {
  version: 1;
  savedAt: string;
  active: LedgerPosition & { since?: number; keys: string };
  archives: { name: string; rotatedAt: number; keys?: string }[];
  totals: RuntimeTotalsState;
  summary: LedgerSummaryState;
}

/** Where the snapshot of a ledger file lives. */
export function snapshotPath(ledgerFile: string): string {
  return path.join(path.dirname(ledgerFile), `${path.basename(ledgerFile, '.jsonl')}.snapshot.json`);
}

/**
 * The snapshot, or undefined when there is none, it cannot be read, or it lacks the job and heartbeat sums (then
 * the ledger is read again).
 */
export async function readSnapshot(file: string): Promise<LedgerSnapshot | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const value = JSON.parse(text) as Partial<LedgerSnapshot>;
    if (value?.version !== 1 || !value.active || !value.totals || !value.summary || !Array.isArray(value.archives)) return undefined;
    // Written before job and heartbeat sums were kept (or by an older version): its figures lack them, so the
    // ledger is read again (in the background when long) rather than leaving them at zero.
    if (!Array.isArray(value.totals.jobs) || !value.totals.heartbeat) return undefined;
    return value as LedgerSnapshot;
  } catch {
    return undefined;
  }
}

/** Writes the snapshot atomically (a crash leaves the previous one whole). */
export async function writeSnapshot(file: string, text: string): Promise<void> {
  const partial = `${file}.tmp`;
  await writeFile(partial, text);
  await rename(partial, file);
}

/**
 * True when the active ledger file still starts with what the snapshot covered: at least as long, and the
 * same bytes just before the snapshot's position (a rotated, replaced or truncated file does not match).
 */
export async function coversActiveFile(ledgerFile: string, position: LedgerPosition): Promise<boolean> {
  if (position.offset === 0) return position.tailHash === tailHashOf(Buffer.alloc(0));
  let handle;
  try {
    handle = await open(ledgerFile, 'r');
  } catch {
    return false;
  }
  try {
    const size = (await handle.stat()).size;
    if (size < position.offset) return false;
    const length = Math.min(64, position.offset);
    const tail = Buffer.alloc(length);
    await handle.read(tail, 0, length, position.offset - length);
    return tailHashOf(tail) === position.tailHash;
  } finally {
    await handle.close();
  }
}
