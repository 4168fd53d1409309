import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, opendir, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { MediaFetchError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import { abortableChunks } from './chunks.ts';
import type { MediaStore, StoredMedia } from './media-store.ts';

const SHA256 = /^[0-9a-f]{64}$/;
const TEMP_PREFIX = '.tmp-';
/** A temporary file this old is left over from a crash (a put never takes this long): sweep deletes it. */
const STALE_TEMP_MS = 60 * 60 * 1000;
/** Files stat'ed or deleted at once by sweep, before it yields to the event loop. */
const SWEEP_BATCH = 32;

/** Options of {@link FileMediaStore}. */
export interface FileMediaStoreOptions {
  /** The store's folder, `stateDir/media`; made on the first put. */
  dir: string;
  logger?: Logger;
}

interface Sidecar {
  mime: string;
}

/** True for a name the store may have made: 64 lowercase hex digits (nothing else reaches the file system). */
export function isSha256(value: string): boolean {
  return SHA256.test(value);
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException)?.code === 'ENOENT';
}

function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The media store of one machine (SPEC §15): content-addressed files `dir/<sha256>`, each with a small sidecar
 * `dir/<sha256>.json` holding its mime type. The data file's modification time is its `storedAt` (set to the
 * put's `now`), so a sweep reads one `stat` per file and no sidecar. Construction touches nothing on disk: start-up
 * costs the same with 10,000 stored files as with none; only {@link sweep} lists the folder, in batches that yield
 * to the event loop.
 */
export class FileMediaStore implements MediaStore {
  private readonly dir: string;
  private readonly logger: Logger | undefined;
  private made: Promise<unknown> | undefined;

  constructor(options: FileMediaStoreOptions) {
    this.dir = options.dir;
    this.logger = options.logger;
  }

  private pathOf(sha256: string): string {
    return path.join(this.dir, sha256);
  }

  async put(body: AsyncIterable<Uint8Array> | Uint8Array, options: { mime: string; maxBytes: number; signal?: AbortSignal; now?: number }): Promise<StoredMedia> {
    const { signal, maxBytes } = options;
    signal?.throwIfAborted();
    this.made ??= mkdir(this.dir, { recursive: true }).catch((error: unknown) => {
      this.made = undefined;
      throw error;
    });
    await this.made;
    const temp = path.join(this.dir, `${TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
    const file = await open(temp, 'wx');
    const hash = createHash('sha256');
    let size = 0;
    let closed = false;
    try {
      for await (const chunk of abortableChunks(body, signal)) {
        size += chunk.length;
        if (size > maxBytes) throw new MediaFetchError('too_large', `The file is larger than ${maxBytes} bytes.`, { status: 413 });
        hash.update(chunk);
        await file.write(chunk);
      }
      signal?.throwIfAborted();
      closed = true;
      await file.close();
      const sha256 = hash.digest('hex');
      const now = options.now ?? Date.now();
      const target = this.pathOf(sha256);
      // Sidecar first: a data file is never visible without its mime type. Renaming over an existing copy
      // (the same bytes, by their name) keeps one.
      const sidecarTemp = `${temp}.json`;
      await writeFile(sidecarTemp, JSON.stringify({ mime: options.mime } satisfies Sidecar));
      await rename(sidecarTemp, `${target}.json`);
      await utimes(temp, now / 1000, now / 1000);
      await rename(temp, target);
      return { sha256, size, mime: options.mime, storedAt: now };
    } catch (error) {
      if (!closed) await file.close().catch(() => undefined);
      await unlink(temp).catch(() => undefined);
      await unlink(`${temp}.json`).catch(() => undefined);
      throw error;
    }
  }

  async get(sha256: string): Promise<Buffer | undefined> {
    if (!isSha256(sha256)) return undefined;
    try {
      return await readFile(this.pathOf(sha256));
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  async stat(sha256: string): Promise<StoredMedia | undefined> {
    if (!isSha256(sha256)) return undefined;
    let info;
    try {
      info = await stat(this.pathOf(sha256));
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
    let mime = 'application/octet-stream';
    try {
      const sidecar = JSON.parse(await readFile(`${this.pathOf(sha256)}.json`, 'utf8')) as Partial<Sidecar>;
      if (typeof sidecar.mime === 'string') mime = sidecar.mime;
    } catch {
      // A missing or broken sidecar costs only the mime type.
    }
    return { sha256, size: info.size, mime, storedAt: Math.round(info.mtimeMs) };
  }

  /**
   * Deletes files older than `retentionMs`, then the oldest until at most `maxBytes` are kept, and temporary
   * files left by a crash. Lists the folder once (a few hundred entries per read) and stats/deletes in batches of {@link SWEEP_BATCH}, yielding to
   * the event loop between them.
   */
  async sweep(options: { now: number; retentionMs: number; maxBytes: number }): Promise<{ removed: number; bytes: number }> {
    // Listed a few hundred entries per read (opendir), not all at once: 20,000 names in one callback is a stall.
    const candidates: string[] = [];
    const shas = new Set<string>();
    try {
      let seen = 0;
      for await (const entry of await opendir(this.dir, { bufferSize: 256 })) {
        if (isSha256(entry.name)) shas.add(entry.name);
        if (shas.has(entry.name) || entry.name.startsWith(TEMP_PREFIX)) candidates.push(entry.name);
        if (++seen % 1000 === 0) await yieldToLoop();
      }
    } catch (error) {
      if (isMissing(error)) return { removed: 0, bytes: 0 };
      throw error;
    }
    const files: { sha256: string; size: number; at: number }[] = [];
    const stale: string[] = [];
    for (let i = 0; i < candidates.length; i += SWEEP_BATCH) {
      await Promise.all(candidates.slice(i, i + SWEEP_BATCH).map(async (name) => {
        try {
          const info = await stat(path.join(this.dir, name));
          if (shas.has(name)) files.push({ sha256: name, size: info.size, at: info.mtimeMs });
          else if (options.now - info.mtimeMs > STALE_TEMP_MS) stale.push(name);
        } catch (error) {
          if (!isMissing(error)) this.logger?.warn({ err: error, file: name }, 'media sweep could not stat a file');
        }
      }));
      await yieldToLoop();
    }
    const doomed: typeof files = [];
    const kept: typeof files = [];
    for (const file of files) (options.now - file.at > options.retentionMs ? doomed : kept).push(file);
    kept.sort((a, b) => a.at - b.at || a.sha256.localeCompare(b.sha256));
    let total = kept.reduce((sum, file) => sum + file.size, 0);
    for (const file of kept) {
      if (total <= options.maxBytes) break;
      doomed.push(file);
      total -= file.size;
    }
    let removed = 0;
    let bytes = 0;
    for (let i = 0; i < doomed.length; i += SWEEP_BATCH) {
      await Promise.all(doomed.slice(i, i + SWEEP_BATCH).map(async (file) => {
        try {
          await unlink(this.pathOf(file.sha256));
          removed++;
          bytes += file.size;
        } catch (error) {
          if (!isMissing(error)) this.logger?.warn({ err: error, sha256: file.sha256 }, 'media sweep could not delete a file');
          return;
        }
        await unlink(`${this.pathOf(file.sha256)}.json`).catch(() => undefined);
      }));
      await yieldToLoop();
    }
    for (const name of stale) await unlink(path.join(this.dir, name)).catch(() => undefined);
    if (removed) this.logger?.info({ removed, bytes }, 'media store swept');
    return { removed, bytes };
  }
}
