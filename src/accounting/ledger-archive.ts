import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { readdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';

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

const SESSION_KEY = /"sessionKey":("(?:[^"\\]|\\.)*")/;

/**
 * Splits an oversized ledger file (one written before rotation existed) into archives of about `partBytes`
 * each, at line ends, with their key filters: `.part` files first, renamed once all are whole, so a crash
 * leaves either the original alone or the original and every part (the next start then reads the files
 * again from scratch). Returns the archives, oldest first; the caller removes the original.
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
  const input = createReadStream(file, { encoding: 'utf8' });
  for await (const line of createInterface({ input, crlfDelay: Infinity })) {
    if (!line.trim()) continue;
    if (!out || bytes >= partBytes) {
      await finish();
      const base = archiveName(file, at, new Set([...taken, ...parts.map((p) => p.archive.name)]));
      const name = base.replace(/\.jsonl$/, `-p${String(parts.length + 1).padStart(3, '0')}.jsonl`);
      const partial = path.join(dir, `${name}.part`);
      out = createWriteStream(partial);
      parts.push({ archive: { name, rotatedAt: at, compressed: false }, keys: new KeyFilter(), partial });
      bytes = 0;
    }
    const key = SESSION_KEY.exec(line)?.[1];
    if (key) {
      try {
        parts[parts.length - 1]!.keys.add(JSON.parse(key) as string);
      } catch { /* not a record: copied as it is */ }
    }
    const text = `${line}\n`;
    bytes += Buffer.byteLength(text);
    if (!out.write(text)) await new Promise<void>((resolve) => out!.once('drain', () => resolve()));
  }
  await finish();
  for (const part of parts) await rename(part.partial, path.join(dir, part.archive.name));
  return parts.map(({ archive, keys }) => ({ archive, keys }));
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
