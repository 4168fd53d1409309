import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Logger } from '../core/logger.ts';
import { KeyFilter, readArchive, type LedgerArchive } from './ledger-archive.ts';
import { keyBlocks } from './ledger-blocks.ts';
import { parseLedgerLine, type LedgerRecord } from './ledger-record.ts';

const CHUNK = 64 * 1024;

/** Reads the records of a ledger file between two byte offsets (line starts), in file order; a missing file has none. */
export async function scanLedgerRange(
  file: string, start: number, end: number, onRecord: (record: LedgerRecord) => void, shouldStop: () => boolean, logger: Logger,
): Promise<number> {
  let skipped = 0;
  let count = 0;
  if (end <= start) return 0;
  try {
    const input = createReadStream(file, { encoding: 'utf8', start, ...(Number.isFinite(end) ? { end: end - 1 } : {}) });
    for await (const line of createInterface({ input, crlfDelay: Infinity })) {
      if (shouldStop()) {
        input.destroy();
        break;
      }
      const record = parseLedgerLine(line);
      if (record) {
        onRecord(record);
        count++;
      } else if (line.trim()) skipped++;
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (skipped) logger.warn({ skipped, file }, 'skipped unreadable token ledger lines (a torn write?)');
  return count;
}

/**
 * Reads every record of an archive, in order, a few milliseconds at a time (the event loop is served in
 * between); returns the filter of its session keys.
 */
export async function scanLedgerArchive(dir: string, archive: LedgerArchive, onRecord: (record: LedgerRecord) => void, shouldStop: () => boolean): Promise<KeyFilter> {
  const keys = new KeyFilter();
  const text = (await readArchive(dir, archive)).toString('utf8');
  let start = 0;
  let sliceStart = performance.now();
  while (start < text.length && !shouldStop()) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const record = parseLedgerLine(text.slice(start, end));
    if (record) {
      keys.add(record.sessionKey);
      onRecord(record);
    }
    start = end + 1;
    if (performance.now() - sliceStart > 8) {
      await new Promise((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
  return keys;
}

/** Where {@link readLedgerBackwards} reads: the active file, then the archives (read when the active file is done). */
export interface BackwardsSource {
  file: string;
  dir: string;
  /** Rotated files, oldest first, each with the filter of its session keys when known. */
  archives: () => readonly (LedgerArchive & { keys?: KeyFilter })[];
}

/**
 * The newest records matching `filter`, newest first: the active file backwards in chunks, then the
 * archives, newest first, skipping those whose key filter rules out `sessionKey`. `contains` (a JSON
 * fragment every match holds) skips other lines without parsing them.
 */
export async function readLedgerBackwards(
  source: BackwardsSource, filter: (record: LedgerRecord) => boolean, limit: number, options: { contains?: string; sessionKey?: string },
): Promise<LedgerRecord[]> {
  const found: LedgerRecord[] = [];
  if (limit <= 0) return found;
  const needle = options.contains ? Buffer.from(options.contains, 'utf8') : undefined;
  const take = (bytes: Buffer): boolean => {
    // A cheap byte search first: most lines of a big ledger belong to other sessions.
    if (needle && bytes.indexOf(needle) < 0) return false;
    const record = parseLedgerLine(bytes.toString('utf8'));
    if (record && filter(record)) found.push(record);
    return found.length >= limit;
  };
  if (await readActiveBackwards(source.file, take)) return found;
  for (const archive of [...source.archives()].reverse()) {
    if (options.sessionKey && archive.keys && !archive.keys.mayHave(options.sessionKey)) continue;
    // A block index: only the gzip members that hold the key's records are read.
    const blocks = options.sessionKey ? await keyBlocks(source.dir, archive, options.sessionKey).catch(() => undefined) : undefined;
    if (blocks) {
      let done = false;
      try {
        for await (const block of blocks) if ((done = linesBackwards(block, take))) break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
      if (done) return found;
      continue;
    }
    let buffer: Buffer;
    try {
      buffer = await readArchive(source.dir, archive);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      // Compressed meanwhile (read it under its new name) or deleted (skip it).
      buffer = await readArchive(source.dir, archive).catch(() => Buffer.alloc(0));
    }
    if (linesBackwards(buffer, take)) return found;
  }
  return found;
}

async function readActiveBackwards(file: string, take: (bytes: Buffer) => boolean): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
  try {
    let position = (await handle.stat()).size;
    let carry = Buffer.alloc(0);
    while (position > 0) {
      const length = Math.min(CHUNK, position);
      position -= length;
      const chunk = Buffer.alloc(length);
      await handle.read(chunk, 0, length, position);
      const buffer = carry.length ? Buffer.concat([chunk, carry]) : chunk;
      let end = buffer.length;
      for (let i = buffer.length - 1; i >= 0; i--) {
        if (buffer[i] !== 0x0a) continue;
        if (end > i + 1 && take(buffer.subarray(i + 1, end))) return true;
        end = i;
      }
      carry = Buffer.from(buffer.subarray(0, end));
    }
    return carry.length > 0 && take(carry);
  } finally {
    await handle.close();
  }
}

/** Calls `take` on each line of a buffer, last line first, until it returns true. */
function linesBackwards(buffer: Buffer, take: (bytes: Buffer) => boolean): boolean {
  let end = buffer.length;
  for (let i = buffer.length - 1; i >= -1; i--) {
    if (i >= 0 && buffer[i] !== 0x0a) continue;
    if (end > i + 1 && take(buffer.subarray(i + 1, end))) return true;
    end = i;
  }
  return false;
}
