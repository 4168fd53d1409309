import { createReadStream } from 'node:fs';
import { access, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { createGunzip, gunzip, gzip } from 'node:zlib';
import type { LedgerArchive } from './ledger-archive.ts';
import { sessionKeyOfLine } from './ledger-record.ts';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** Uncompressed bytes per gzip member of a compressed archive (whole lines; a longer line makes a bigger one). */
const BLOCK_BYTES = 64 * 1024;
/** Block indexes kept parsed (one per archive a timeline looked at lately). */
const CACHED_INDEXES = 16;

/**
 * The sidecar of a compressed archive (`<archive>.jsonl.gz.idx`): where each gzip member starts, the file's
 * size, and which members hold each session key's records.
 */
interface BlockIndex {
  version: 1;
  offsets: number[];
  size: number;
  keys: Record<string, number[]>;
}

/** The block index's file name of a compressed archive. */
export function blockIndexName(archiveName: string): string {
  return `${archiveName}.idx`;
}

/**
 * Writes the lines of `source` to `partial` as gzip members of about {@link BLOCK_BYTES} of whole lines each
 * (each compressed on the thread pool) and returns their block index.
 */
async function writeBlocks(source: AsyncIterable<Buffer>, partial: string): Promise<BlockIndex> {
  const index: BlockIndex = { version: 1, offsets: [], size: 0, keys: {} };
  const out = await open(partial, 'w');
  let block: Buffer[] = [];
  let blockBytes = 0;
  const add = (line: Buffer) => {
    block.push(line);
    blockBytes += line.length;
    const key = sessionKeyOfLine(line);
    if (key === undefined) return;
    const blocks = (index.keys[key] ??= []);
    if (blocks[blocks.length - 1] !== index.offsets.length) blocks.push(index.offsets.length);
  };
  const flush = async () => {
    if (!blockBytes) return;
    const compressed = await gzipAsync(Buffer.concat(block, blockBytes));
    index.offsets.push(index.size);
    await out.write(compressed, 0, compressed.length, index.size);
    index.size += compressed.length;
    block = [];
    blockBytes = 0;
  };
  try {
    let carry: Buffer = Buffer.alloc(0);
    for await (const chunk of source) {
      const buffer = carry.length ? Buffer.concat([carry, chunk]) : chunk;
      let start = 0;
      for (let end = buffer.indexOf(0x0a, start); end >= 0; end = buffer.indexOf(0x0a, start)) {
        add(buffer.subarray(start, end + 1));
        start = end + 1;
        if (blockBytes >= BLOCK_BYTES) await flush();
      }
      carry = Buffer.from(buffer.subarray(start));
    }
    if (carry.length) add(carry);
    await flush();
    await out.sync();
  } finally {
    await out.close();
  }
  return index;
}

async function writeIndex(dir: string, archiveName: string, index: BlockIndex): Promise<void> {
  const indexFile = path.join(dir, blockIndexName(archiveName));
  await writeFile(`${indexFile}.tmp`, JSON.stringify(index));
  await rename(`${indexFile}.tmp`, indexFile);
}

/**
 * Compresses a rotated `.jsonl` into `.jsonl.gz` and removes the plain file. The archive is a series of gzip
 * members of about 64 KiB of whole lines each (still one gzip file to any reader: members concatenate), with a
 * block index beside it, so a session's timeline decompresses only the members that hold its records. Streamed;
 * each member is compressed on the thread pool. The index is in place before the archive, the plain file goes
 * last: a crash leaves the plain file, compressed again at the next start.
 */
export async function compressArchive(dir: string, name: string): Promise<string> {
  const source = path.join(dir, name);
  const target = `${source}.gz`;
  const index = await writeBlocks(createReadStream(source) as AsyncIterable<Buffer>, `${target}.tmp`);
  await writeIndex(dir, `${name}.gz`, index);
  await rename(`${target}.tmp`, target);
  await rm(source, { force: true });
  return `${name}.gz`;
}

/**
 * Gives a compressed archive without a block index (compressed by a version before them, so a timeline reads
 * it whole) the block form and its index; false when it has an index already. The archive is replaced first and
 * its index written after: a crash in between leaves an archive without an index (read whole, indexed again at
 * the next start), never an index that describes another file.
 */
export async function indexArchive(dir: string, name: string): Promise<boolean> {
  const file = path.join(dir, name);
  if (await access(path.join(dir, blockIndexName(name))).then(() => true, () => false)) return false;
  let index: BlockIndex;
  try {
    index = await writeBlocks(createReadStream(file).pipe(createGunzip()) as AsyncIterable<Buffer>, `${file}.tmp`);
  } catch (error) {
    // An archive that does not decompress stays as it is (read whole, as before); its partial copy goes.
    await rm(`${file}.tmp`, { force: true });
    throw error;
  }
  await rename(`${file}.tmp`, file);
  await writeIndex(dir, name, index);
  cache.delete(file);
  return true;
}

const cache = new Map<string, BlockIndex | null>();

/** An archive's block index (cached), null when it has none (compressed before block indexes, or unreadable). */
async function blockIndexOf(file: string): Promise<BlockIndex | null> {
  const cached = cache.get(file);
  if (cached !== undefined) {
    cache.delete(file);
    cache.set(file, cached);
    return cached;
  }
  let index: BlockIndex | null = null;
  try {
    const parsed = JSON.parse(await readFile(blockIndexName(file), 'utf8')) as BlockIndex;
    if (parsed.version === 1 && Array.isArray(parsed.offsets) && typeof parsed.keys === 'object') index = parsed;
  } catch { /* none: the caller reads the whole archive */ }
  cache.set(file, index);
  if (cache.size > CACHED_INDEXES) cache.delete(cache.keys().next().value as string);
  return index;
}

/**
 * The members of a compressed archive that hold `sessionKey`'s records, decompressed, newest first (each whole
 * lines, other keys' too); undefined when the archive has no block index (the caller reads it whole).
 */
export async function keyBlocks(dir: string, archive: LedgerArchive, sessionKey: string): Promise<AsyncIterable<Buffer> | undefined> {
  if (!archive.compressed) return undefined;
  const file = path.join(dir, archive.name);
  const index = await blockIndexOf(file);
  if (!index) return undefined;
  const blocks = index.keys[sessionKey] ?? [];
  return (async function* newestFirst() {
    if (!blocks.length) return;
    const handle = await open(file, 'r');
    try {
      for (let i = blocks.length - 1; i >= 0; i--) {
        const n = blocks[i]!;
        const start = index.offsets[n]!;
        const end = index.offsets[n + 1] ?? index.size;
        const compressed = Buffer.alloc(end - start);
        await handle.read(compressed, 0, compressed.length, start);
        yield await gunzipAsync(compressed);
      }
    } finally {
      await handle.close();
    }
  })();
}
