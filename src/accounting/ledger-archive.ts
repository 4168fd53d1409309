import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { readdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { sessionKeyOfLine } from './ledger-record.ts';

const gunzipAsync = promisify(gunzip);

/** One rotated ledger file: `<base>.<UTC stamp>.jsonl.gz` (or `.jsonl` while it is being compressed). */
export interface LedgerArchive {
  /** File name inside the audit folder. */
  name: string;
  /** When it was rotated (epoch ms), from its name. */
  rotatedAt: number;
  compressed: boolean;
}

/** `turn-token-usage.jsonl` → `turn-token-usage`. */
function baseOf(activeFile: string): string {
  return path.basename(activeFile).replace(/\.jsonl$/, '');
}

/** A file-name-safe UTC stamp that sorts like the time: `2026-12-01T07-30-00-000Z`. */
export function archiveStamp(at: number): string {
  return new Date(at).toISOString().replace(/[:.]/g, '-');
}

function parseStamp(stamp: string): number {
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})-(\d{2})-(\d{3})Z/.exec(stamp);
  return m ? Date.parse(`${m[1]}T${m[2]}:${m[3]}:${m[4]}.${m[5]}Z`) : Number.NaN;
}

/** The name a file rotated at `at` gets (uncompressed; `-n` added when that name is taken). */
export function archiveName(activeFile: string, at: number, taken: ReadonlySet<string>): string {
  const base = `${baseOf(activeFile)}.${archiveStamp(at)}`;
  let name = `${base}.jsonl`;
  for (let n = 2; taken.has(name) || taken.has(`${name}.gz`); n++) name = `${base}-${n}.jsonl`;
  return name;
}

/** The archives next to an active ledger file, oldest first. */
export async function listArchives(activeFile: string): Promise<LedgerArchive[]> {
  const dir = path.dirname(activeFile);
  const prefix = `${baseOf(activeFile)}.`;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const byName = new Map<string, LedgerArchive>();
  for (const name of names) {
    if (!name.startsWith(prefix) || name === path.basename(activeFile)) continue;
    const rest = name.slice(prefix.length);
    const compressed = rest.endsWith('.jsonl.gz');
    if (!compressed && !rest.endsWith('.jsonl')) continue;
    const rotatedAt = parseStamp(rest);
    if (Number.isNaN(rotatedAt)) continue;
    const key = compressed ? name.slice(0, -3) : name;
    // While compressing, both exist until the plain one is removed: the plain one is whole, take it.
    if (!compressed || !byName.has(key)) byName.set(key, { name, rotatedAt, compressed });
  }
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/** The text of an archive, decompressed on the thread pool. */
export async function readArchive(dir: string, archive: LedgerArchive): Promise<Buffer> {
  const raw = await readFile(path.join(dir, archive.name));
  return archive.compressed ? gunzipAsync(raw) : raw;
}

/** Removes leftovers of a compression or a split cut short (`.gz.tmp`, `.gz.idx.tmp`, `.part`). */
export async function removePartials(activeFile: string): Promise<void> {
  const dir = path.dirname(activeFile);
  const prefix = `${baseOf(activeFile)}.`;
  const names = await readdir(dir).catch(() => [] as string[]);
  const partial = (n: string) => n.startsWith(prefix) && (n.endsWith('.jsonl.gz.tmp') || n.endsWith('.jsonl.gz.idx.tmp') || n.endsWith('.jsonl.part'));
  await Promise.all(names.filter(partial).map((n) => rm(path.join(dir, n), { force: true })));
}

/** The split reads the oversized file this much at a time. */
const SPLIT_CHUNK = 256 * 1024;

/**
 * Splits an oversized ledger file (one written before rotation existed) into archives of about `partBytes`
 * each, at line ends, with their key filters: `.part` files first, renamed once all are whole, so a crash
 * leaves either the original alone or the original and every part (the next start then reads the files
 * again from scratch). Returns the archives, oldest first; the caller removes the original. The file is read
 * in big chunks and copied by slices (lines are found with byte searches; only each line's session key is
 * decoded), so a timeline read meanwhile shares the main thread with little.
 */
export async function splitIntoArchives(file: string, at: number, partBytes: number, taken: ReadonlySet<string>): Promise<{ archive: LedgerArchive; keys: KeyFilter }[]> {
  const dir = path.dirname(file);
  const parts: { archive: LedgerArchive; keys: KeyFilter; partial: string }[] = [];
  let out: ReturnType<typeof createWriteStream> | undefined;
  let bytes = 0;
  const finish = async () => {
    if (!out) return;
    const stream = out;
    out = undefined;
    await new Promise<void>((resolve, reject) => stream.end((error?: Error | null) => (error ? reject(error) : resolve())));
  };
  const write = async (data: Buffer) => {
    if (data.length && !out!.write(data)) await new Promise<void>((resolve) => out!.once('drain', () => resolve()));
  };
  /** Copies the lines of `buffer` (each ends with a line break), starting a new part where the current one is full. */
  const copy = async (buffer: Buffer) => {
    let run = 0;
    let lineStart = 0;
    while (lineStart < buffer.length) {
      const newline = buffer.indexOf(0x0a, lineStart);
      const lineEnd = newline < 0 ? buffer.length : newline + 1;
      const line = buffer.subarray(lineStart, lineEnd);
      if (isBlank(line)) {
        // Blank lines are left out: what comes before goes as it is, the copy goes on after.
        if (out) await write(buffer.subarray(run, lineStart));
        run = lineEnd;
      } else {
        if (!out || bytes >= partBytes) {
          if (out) await write(buffer.subarray(run, lineStart));
          run = lineStart;
          await finish();
          const base = archiveName(file, at, new Set([...taken, ...parts.map((p) => p.archive.name)]));
          const name = base.replace(/\.jsonl$/, `-p${String(parts.length + 1).padStart(3, '0')}.jsonl`);
          const partial = path.join(dir, `${name}.part`);
          out = createWriteStream(partial);
          parts.push({ archive: { name, rotatedAt: at, compressed: false }, keys: new KeyFilter(), partial });
          bytes = 0;
        }
        const key = sessionKeyOfLine(line);
        if (key !== undefined) parts[parts.length - 1]!.keys.add(key);
        bytes += line.length;
      }
      lineStart = lineEnd;
    }
    if (out) await write(buffer.subarray(run));
  };
  let carry = Buffer.alloc(0);
  for await (const chunk of createReadStream(file, { highWaterMark: SPLIT_CHUNK }) as AsyncIterable<Buffer>) {
    const first = chunk.indexOf(0x0a);
    if (first < 0) {
      carry = Buffer.concat([carry, chunk]);
      continue;
    }
    // The line the previous chunk began is joined on its own (no copy of the whole chunk).
    await copy(carry.length ? Buffer.concat([carry, chunk.subarray(0, first + 1)]) : chunk.subarray(0, first + 1));
    const last = chunk.lastIndexOf(0x0a);
    if (last > first) await copy(chunk.subarray(first + 1, last + 1));
    carry = Buffer.from(chunk.subarray(last + 1));
  }
  // A last line without its line break (a write cut short) gets one.
  if (!isBlank(carry)) await copy(Buffer.concat([carry, Buffer.from('\n')]));
  await finish();
  for (const part of parts) await rename(part.partial, path.join(dir, part.archive.name));
  return parts.map(({ archive, keys }) => ({ archive, keys }));
}

/** A line of nothing but white space (or nothing). */
function isBlank(line: Buffer): boolean {
  for (const byte of line) if (byte !== 0x0a && byte !== 0x0d && byte !== 0x20 && byte !== 0x09) return false;
  return true;
}

const BLOOM_BITS = 65_536;
const BLOOM_HASHES = 3;
/** Keys a filter remembers as added (then it forgets them all and starts over). */
const RECENT_KEYS = 4096;

/**
 * Which session keys a ledger file holds, as a Bloom filter (8 KiB: under 1 % false positives for 5000
 * keys), so that a session's timeline skips the archives that cannot have its records.
 */
export class KeyFilter {
  readonly bits: Uint8Array;
  /**
   * Keys added lately: adding one again changes no bit, so it skips the hash (a SHA-1 per ledger record,
   * where a busy session writes a record per call). Bits are never cleared, so a remembered key is always in.
   */
  private readonly recent = new Set<string>();

  constructor(bits?: Uint8Array) {
    this.bits = bits ?? new Uint8Array(BLOOM_BITS / 8);
  }

  static fromBase64(text: string | undefined): KeyFilter | undefined {
    if (!text) return undefined;
    const bits = Buffer.from(text, 'base64');
    return bits.length === BLOOM_BITS / 8 ? new KeyFilter(new Uint8Array(bits)) : undefined;
  }

  add(key: string): void {
    if (this.recent.has(key)) return;
    for (const bit of positions(key)) this.bits[bit >> 3]! |= 1 << (bit & 7);
    if (this.recent.size >= RECENT_KEYS) this.recent.clear();
    this.recent.add(key);
  }

  mayHave(key: string): boolean {
    return positions(key).every((bit) => (this.bits[bit >> 3]! & (1 << (bit & 7))) !== 0);
  }

  toBase64(): string {
    return Buffer.from(this.bits).toString('base64');
  }
}

function positions(key: string): number[] {
  const digest = createHash('sha1').update(key).digest();
  return Array.from({ length: BLOOM_HASHES }, (_, i) => digest.readUInt32BE(i * 4) % BLOOM_BITS);
}
