import { createHash } from 'node:crypto';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { AppendOnlyFile } from '../core/append-only-file.ts';
import type { Logger } from '../core/logger.ts';
import {
  archiveName, KeyFilter, listArchives, removePartials, splitIntoArchives, type LedgerArchive,
} from './ledger-archive.ts';
import { blockIndexName, compressArchive, indexArchive } from './ledger-blocks.ts';
import type { LedgerRecord } from './ledger-record.ts';
import { readLedgerBackwards, scanLedgerArchive, scanLedgerRange } from './ledger-reader.ts';

/** When the active file is rotated (`ledger` in the config). */
export interface LedgerRotation {
  /** `size`: past `maxFileBytes`; `daily`: also at each UTC midnight; `off`: never. */
  rotate: 'size' | 'daily' | 'off';
  maxFileBytes: number;
  /** Archives rotated longer ago than this are deleted (0 keeps them). */
  retentionDays: number;
}

/** Options of {@link TokenLedger}. */
export interface TokenLedgerOptions {
  /** `<stateDir>/audit/turn-token-usage.jsonl`. */
  file: string;
  logger: Logger;
  /** Lines kept in memory while the disk refuses writes; older ones are dropped (and logged). */
  maxPendingLines?: number;
  /** Default: by size, 16 MiB, archives kept 365 days. */
  rotation?: LedgerRotation;
  /** Epoch ms (tests inject a clock). */
  now?: () => number;
  /** Called when everything appended so far is on disk and nothing is queued (a snapshot may be taken). */
  onSettled?: () => void;
}

/** A rotated file and which session keys it holds (when known). */
export interface ArchiveEntry extends LedgerArchive {
  keys?: KeyFilter;
}

/** Where the active file stands: its size and a hash of its last bytes, so a snapshot can be checked against it. */
export interface LedgerPosition {
  offset: number;
  tailHash: string;
}

const TAIL = 64;
const DAY = 86_400_000;
export const DEFAULT_ROTATION: LedgerRotation = { rotate: 'size', maxFileBytes: 16 * 1024 * 1024, retentionDays: 365 };

/** The hash of the last bytes of a file's content, as stored in snapshots. */
export function tailHashOf(tail: Buffer): string {
  return createHash('sha1').update(tail).digest('hex');
}

/**
 * The append-only JSONL token ledger (SPEC §4). {@link append} never blocks the turn: lines are queued and
 * written in batches by one background writer; {@link flush} waits for everything queued (shutdown).
 * A torn last line (crash mid-write) is skipped when reading and never glued to the next record.
 * The active file is rotated by size or day into `turn-token-usage.<UTC stamp>.jsonl.gz` archives (compressed
 * in the background, deleted after `retentionDays`); each archive keeps a filter of its session keys.
 */
export class TokenLedger {
  readonly file: string;
  readonly dir: string;
  /** Rotated files, oldest first. */
  archives: ArchiveEntry[] = [];
  /** Session keys in the active file. */
  activeKeys = new KeyFilter();
  /** When the active file got its first record (daily rotation). */
  activeSince: number | undefined;
  /** Rotations done by this instance. */
  rotations = 0;
  private readonly logger: Logger;
  private readonly maxPending: number;
  private readonly rotation: LedgerRotation;
  private readonly now: () => number;
  private readonly onSettled?: () => void;
  private pending: { line: string; key: string }[] = [];
  private writing: Promise<void> | undefined;
  private prefix = '';
  private ready: Promise<void> | undefined;
  private readonly out: AppendOnlyFile;
  private written = 0;
  private tail = Buffer.alloc(0);
  private rotationHeld = false;
  private rotationRetryAt = 0;
  private readonly background = new Set<Promise<unknown>>();
  /** Bumped each time a rotation puts the active file among the archives (a read across it starts again). */
  private generation = 0;
  /** A rotation's swap of the active file and the archives, while it runs (short: a rename or an unlink). */
  private swapping: Promise<void> | undefined;
  private compressing: Promise<unknown> = Promise.resolve();

  constructor(options: TokenLedgerOptions) {
    this.file = options.file;
    this.dir = path.dirname(options.file);
    this.out = new AppendOnlyFile(options.file);
    this.logger = options.logger;
    this.maxPending = options.maxPendingLines ?? 100_000;
    this.rotation = options.rotation ?? DEFAULT_ROTATION;
    this.now = options.now ?? Date.now;
    this.onSettled = options.onSettled;
  }

  /** Creates the folder, repairs a torn last line so the next record starts on its own line, lists the archives. */
  open(): Promise<void> {
    this.ready ??= (async () => {
      await mkdir(this.dir, { recursive: true });
      const size = await stat(this.file).then((s) => s.size, () => 0);
      this.written = size;
      if (size > 0) {
        const handle = await open(this.file, 'r');
        try {
          const length = Math.min(TAIL, size);
          const tail = Buffer.alloc(length);
          await handle.read(tail, 0, length, size - length);
          this.tail = tail;
          if (tail[length - 1] !== 0x0a) this.prefix = '\n';
        } finally {
          await handle.close();
        }
      }
      await removePartials(this.file);
      const known = new Map(this.archives.map((a) => [a.name.replace(/\.gz$/, ''), a.keys]));
      this.archives = (await listArchives(this.file)).map((a) => ({ ...a, keys: known.get(a.name.replace(/\.gz$/, '')) }));
      for (const archive of this.archives.filter((a) => !a.compressed)) this.compressInBackground(archive);
      await this.applyRetention();
      // Archives compressed before block indexes get one, so that a timeline stops reading them whole.
      for (const archive of this.archives.filter((a) => a.compressed)) {
        this.inBackground(archive, async () => { await indexArchive(this.dir, archive.name); }, 'could not index a token ledger archive; timelines read it whole');
      }
    })();
    // A failed open (folder not creatable yet) is tried again by the next write.
    this.ready.catch(() => { this.ready = undefined; });
    return this.ready;
  }

  /** Takes the key filters and the active file's start from a snapshot (after {@link open}). */
  loadIndex(index: { archives: { name: string; keys?: string }[]; activeKeys?: string; activeSince?: number }): void {
    const saved = new Map(index.archives.map((a) => [a.name.replace(/\.gz$/, ''), a.keys]));
    for (const archive of this.archives) archive.keys ??= KeyFilter.fromBase64(saved.get(archive.name.replace(/\.gz$/, '')));
    this.activeKeys = KeyFilter.fromBase64(index.activeKeys) ?? this.activeKeys;
    this.activeSince = index.activeSince ?? this.activeSince;
  }

  /** Bytes in the active file, and the hash of its last ones. */
  position(): LedgerPosition {
    return { offset: this.written, tailHash: tailHashOf(this.tail) };
  }

  /** True when nothing is queued or being written. */
  get settled(): boolean {
    return !this.writing && this.pending.length === 0;
  }

  /**
   * Queues one record; the write happens in the background, after the I/O callbacks of the current turn of the
   * event loop, so the records of calls that finish together (busy sessions) go to disk in one write.
   */
  append(record: LedgerRecord): void {
    this.pending.push({ line: `${JSON.stringify(record)}\n`, key: record.sessionKey });
    if (this.pending.length > this.maxPending) {
      const dropped = this.pending.splice(0, this.pending.length - this.maxPending).length;
      this.logger.error({ dropped, file: this.file }, 'token ledger writes keep failing; dropped the oldest queued records');
    }
    this.writing ??= new Promise((resolve) => { setImmediate(resolve); }).then(() => this.drain());
  }

  /** Resolves once every record appended so far is on disk (or its write failed and was logged). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.pending.length) {
      this.writing = this.drain();
      await this.writing;
    }
  }

  /** Writes what is queued, waits (bounded) for archives being compressed, and closes the file (shutdown). */
  async close(): Promise<void> {
    await this.flush();
    this.out.close();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.background]), new Promise((resolve) => { timer = setTimeout(resolve, 10_000); })]);
    clearTimeout(timer);
  }

  /** No rotation until {@link resumeRotation} (while history is read back from the active file). */
  holdRotation(): void {
    this.rotationHeld = true;
  }

  /** Allows rotation again, and rotates now when the active file is due. */
  resumeRotation(): void {
    this.rotationHeld = false;
    if (this.rotationDue()) this.writing ??= this.drain();
  }

  /** Reads every record of the active file in file order (skipping torn or foreign lines). */
  async scan(onRecord: (record: LedgerRecord) => void): Promise<number> {
    await this.flush();
    return this.scanRange(0, Number.POSITIVE_INFINITY, onRecord);
  }

  /** Reads the records of the active file between two byte offsets (line starts), in file order. */
  scanRange(start: number, end: number, onRecord: (record: LedgerRecord) => void, shouldStop: () => boolean = () => false): Promise<number> {
    return scanLedgerRange(this.file, start, end, onRecord, shouldStop, this.logger);
  }

  /**
   * Reads every record of an archive, in order, a few milliseconds at a time (the event loop is served in
   * between); returns the filter of its session keys.
   */
  scanArchive(archive: LedgerArchive, onRecord: (record: LedgerRecord) => void, shouldStop: () => boolean = () => false): Promise<KeyFilter> {
    return scanLedgerArchive(this.dir, archive, onRecord, shouldStop);
  }

  /**
   * The newest records matching `filter`, newest first: those queued and not written yet, the active file
   * backwards in chunks, then the archives, newest first, skipping those whose key filter rules out `sessionKey`.
   * `contains` (a JSON fragment every match holds) skips other lines without parsing them. It does not wait for
   * the writer: an old oversized ledger being split into archives at start (seconds) is read as the active file
   * meanwhile. What it reads is one moment's: the queue, the active file up to its written size and the archives
   * of then; a rotation that moves them meanwhile makes it read again.
   */
  async readBackwards(filter: (record: LedgerRecord) => boolean, limit: number, options: { contains?: string; sessionKey?: string } = {}): Promise<LedgerRecord[]> {
    // Not opened (the folder is not there yet): read what there is, as before any write.
    await this.open().catch(() => undefined);
    for (;;) {
      while (this.swapping) await this.swapping;
      const generation = this.generation;
      const archives = [...this.archives];
      const source = { file: this.file, dir: this.dir, archives: () => archives, activeBytes: this.written, queued: this.pending.map((p) => p.line) };
      const found = await readLedgerBackwards(source, filter, limit, options);
      if (generation === this.generation && !this.swapping) return found;
    }
  }

  private rotationDue(): boolean {
    if (this.rotation.rotate === 'off' || this.rotationHeld || this.written === 0 || this.now() < this.rotationRetryAt) return false;
    if (this.written >= this.rotation.maxFileBytes) return true;
    return this.rotation.rotate === 'daily' && this.activeSince !== undefined && Math.floor(this.activeSince / DAY) !== Math.floor(this.now() / DAY);
  }

  private async drain(): Promise<void> {
    try {
      await this.open();
      for (;;) {
        if (this.rotationDue()) {
          try {
            await this.rotate();
          } catch (error) {
            // Records keep going to the active file; rotation is tried again later.
            this.rotationRetryAt = this.now() + 600_000;
            this.logger.warn({ err: error, file: this.file }, 'could not rotate the token ledger; trying again in 10 minutes');
          }
        }
        if (!this.pending.length) break;
        const batch = this.pending;
        this.pending = [];
        const text = this.prefix + batch.map((p) => p.line).join('');
        try {
          this.out.append(text);
        } catch (error) {
          this.pending = [...batch, ...this.pending];
          this.logger.error({ err: error, file: this.file, queued: this.pending.length }, 'could not append to the token ledger; will retry with the next record or at shutdown');
          return;
        }
        this.prefix = '';
        const bytes = Buffer.from(text.slice(-TAIL), 'utf8');
        this.written += Buffer.byteLength(text, 'utf8');
        this.tail = Buffer.concat([this.tail, bytes]).subarray(-TAIL);
        this.activeSince ??= this.now();
        for (const p of batch) this.activeKeys.add(p.key);
      }
    } catch (error) {
      this.logger.error({ err: error, file: this.file }, 'could not open or rotate the token ledger');
    } finally {
      this.writing = undefined;
    }
    if (!this.pending.length) this.onSettled?.();
  }

  /**
   * Renames the active file to an archive, starts a new one, compresses the archive in the background. A file
   * far over the size (written before rotation existed) is split into archives of the usual size first, so
   * that a timeline never has to read one huge archive.
   */
  private async rotate(): Promise<void> {
    const at = this.now();
    this.out.close();
    const taken = new Set(this.archives.map((a) => a.name));
    // The long part first; the active file stays in place meanwhile (readers read it as the active file).
    const parts = this.written > 2 * this.rotation.maxFileBytes ? await splitIntoArchives(this.file, at, this.rotation.maxFileBytes, taken) : undefined;
    let added: ArchiveEntry[] = [];
    const swap = (async () => {
      if (parts) {
        await rm(this.file, { force: true });
        added = parts.map(({ archive, keys }) => ({ ...archive, keys }));
      } else {
        const name = archiveName(this.file, at, taken);
        await rename(this.file, path.join(this.dir, name));
        added = [{ name, rotatedAt: at, compressed: false, keys: this.activeKeys }];
      }
      this.archives.push(...added);
      this.activeKeys = new KeyFilter();
      this.activeSince = undefined;
      this.written = 0;
      this.tail = Buffer.alloc(0);
      this.prefix = '';
      this.rotations++;
      this.generation++;
      this.out.append(''); // the active file exists again at once, for whoever follows it
    })();
    this.swapping = swap;
    try {
      await swap;
    } finally {
      this.swapping = undefined;
    }
    this.logger.info({ archives: added.map((a) => a.name) }, 'token ledger rotated');
    for (const archive of added) this.compressInBackground(archive);
    await this.applyRetention();
  }

  private compressInBackground(archive: ArchiveEntry): void {
    this.inBackground(archive, async () => {
      archive.name = await compressArchive(this.dir, archive.name);
      archive.compressed = true;
    }, 'could not compress a token ledger archive; it stays uncompressed');
  }

  /**
   * Compressions and indexings of archives run one after another (each streams on the thread pool), so a split
   * or a first start after an upgrade never floods the CPU.
   */
  private inBackground(archive: ArchiveEntry, task: () => Promise<void>, failure: string): void {
    const work = this.compressing.then(task)
      .catch((err: unknown) => this.logger.warn({ err, archive: archive.name }, failure))
      .finally(() => this.background.delete(work));
    this.background.add(work);
    this.compressing = work;
  }

  private async applyRetention(): Promise<void> {
    if (!this.rotation.retentionDays) return;
    const cutoff = this.now() - this.rotation.retentionDays * DAY;
    const expired = this.archives.filter((a) => a.rotatedAt < cutoff && a.compressed);
    if (!expired.length) return;
    this.archives = this.archives.filter((a) => !expired.includes(a));
    await Promise.all(expired.flatMap((a) => [rm(path.join(this.dir, a.name), { force: true }), rm(path.join(this.dir, blockIndexName(a.name)), { force: true })]));
    this.logger.info({ deleted: expired.map((a) => a.name) }, 'deleted token ledger archives past ledger.retentionDays');
  }
}
