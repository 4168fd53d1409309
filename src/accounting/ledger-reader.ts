import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Logger } from '../core/logger.ts';
import { KeyFilter, readArchive, type LedgerArchive } from './ledger-archive.ts';
import { keyBlocks } from './ledger-blocks.ts';
import { parseLedgerLine, type LedgerRecord } from './ledger-record.ts';

/** The active file is read backwards this much at a time (one buffer, reused). */
const BACKWARDS_CHUNK = 1024 * 1024;

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

/** Where {@link readLedgerBackwards} reads: the queued lines, the active file, then the archives (read when the active file is done). */
export interface BackwardsSource {
  file: string;
  dir: string;
  /** Lines queued and not written yet, oldest first (read before the file). */
  queued?: readonly string[];
  /** How much of the active file to read (its written size when the read began; default: all of it). */
  activeBytes?: number;
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
  // Most lines of a big ledger belong to other sessions: the lines holding `contains` are found by a byte search
  // over whole buffers, and only those are cut out and parsed.
  const needle = options.contains ? Buffer.from(options.contains, 'utf8') : undefined;
  const take = (bytes: Buffer): boolean => {
    const record = parseLedgerLine(bytes.toString('utf8'));
    if (record && filter(record)) found.push(record);
    return found.length >= limit;
  };
  for (let i = (source.queued?.length ?? 0) - 1; i >= 0; i--) {
    const line = source.queued![i]!;
    if (take(Buffer.from(line.endsWith('\n') ? line.slice(0, -1) : line, 'utf8'))) return found;
  }
  if (await readActiveBackwards(source.file, needle, take, source.activeBytes)) return found;
  for (const archive of [...source.archives()].reverse()) {
    if (options.sessionKey && archive.keys && !archive.keys.mayHave(options.sessionKey)) continue;
    // A block index: only the gzip members that hold the key's records are read.
    const blocks = options.sessionKey ? await keyBlocks(source.dir, archive, options.sessionKey).catch(() => undefined) : undefined;
    if (blocks) {
      let done = false;
      try {
        for await (const block of blocks) if ((done = linesBackwards(block, 0, needle, take))) break;
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
    if (linesBackwards(buffer, 0, needle, take)) return found;
  }
  return found;
}

async function readActiveBackwards(file: string, needle: Buffer | undefined, take: (bytes: Buffer) => boolean, bytes = Number.POSITIVE_INFINITY): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
  try {
    let position = Math.min((await handle.stat()).size, bytes);
    const chunk = Buffer.allocUnsafe(Math.min(BACKWARDS_CHUNK, position));
    // The start of the line that ends in the chunk read before (the part before its first line break).
    let carry = Buffer.alloc(0);
    const takeLine = (line: Buffer) => line.length > 0 && (!needle || line.indexOf(needle) >= 0) && take(line);
    while (position > 0) {
      const length = Math.min(chunk.length, position);
      position -= length;
      await handle.read(chunk, 0, length, position);
      const view = chunk.subarray(0, length);
      const last = view.lastIndexOf(0x0a);
      if (last < 0) {
        carry = Buffer.concat([view, carry]);
        continue;
      }
      // The line this chunk ends with, joined on its own (the chunk itself is never copied).
      if (takeLine(carry.length ? Buffer.concat([view.subarray(last + 1), carry]) : view.subarray(last + 1))) return true;
      const first = position > 0 ? view.indexOf(0x0a) : -1;
      if (linesBackwards(view.subarray(0, last), first + 1, needle, take)) return true;
      carry = position > 0 ? Buffer.from(view.subarray(0, first)) : Buffer.alloc(0);
    }
    return takeLine(carry);
  } finally {
    await handle.close();
  }
}

/**
 * Calls `take` on the lines of `buffer` from `start` (a line's start) to its end, last line first, until it returns
 * true; with `needle`, only on the lines that hold it (found by a byte search over the buffer, not line by line).
 */
function linesBackwards(buffer: Buffer, start: number, needle: Buffer | undefined, take: (bytes: Buffer) => boolean): boolean {
  let end = buffer.length;
  if (!needle) {
    for (let i = end - 1; i >= start - 1; i--) {
      if (i >= start && buffer[i] !== 0x0a) continue;
      if (end > i + 1 && take(buffer.subarray(i + 1, end))) return true;
      end = i;
    }
    return false;
  }
  let at = end - needle.length;
  while (at >= start) {
    at = buffer.lastIndexOf(needle, at);
    if (at < start) return false;
    const lineStart = Math.max(start, buffer.lastIndexOf(0x0a, at) + 1);
    const newline = buffer.indexOf(0x0a, at);
    const lineEnd = newline < 0 || newline > end ? end : newline;
    if (take(buffer.subarray(lineStart, lineEnd))) return true;
    end = lineStart - 1;
    // A match starts at least two bytes before this line's start (a line break between), if any is left.
    at = lineStart - 2;
  }
  return false;
}
