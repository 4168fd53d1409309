import { createReadStream } from 'node:fs';
import { mkdir, open, stat } from 'node:fs/promises';
import { AppendOnlyFile } from '../core/append-only-file.ts';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from '../core/logger.ts';
import { parseLedgerLine, type LedgerRecord } from './ledger-record.ts';

/** Options of {@link TokenLedger}. */
export interface TokenLedgerOptions {
  /** `<stateDir>/audit/turn-token-usage.jsonl`. */
  file: string;
  logger: Logger;
  /** Lines kept in memory while the disk refuses writes; older ones are dropped (and logged). */
  maxPendingLines?: number;
}

const CHUNK = 64 * 1024;

/**
 * The append-only JSONL token ledger (SPEC §4). {@link append} never blocks the turn: lines are queued and
 * written in batches by one background writer; {@link flush} waits for everything queued (shutdown).
 * A torn last line (crash mid-write) is skipped when reading and never glued to the next record.
 */
export class TokenLedger {
  readonly file: string;
  private readonly logger: Logger;
  private readonly maxPending: number;
  private pending: string[] = [];
  private writing: Promise<void> | undefined;
  private prefix = '';
  private ready: Promise<void> | undefined;
  private readonly out: AppendOnlyFile;

  constructor(options: TokenLedgerOptions) {
    this.file = options.file;
    this.out = new AppendOnlyFile(options.file);
    this.logger = options.logger;
    this.maxPending = options.maxPendingLines ?? 100_000;
  }

  /** Creates the folder and repairs a torn last line so the next record starts on its own line. */
  open(): Promise<void> {
    this.ready ??= (async () => {
      await mkdir(path.dirname(this.file), { recursive: true });
      const size = await stat(this.file).then((s) => s.size, () => 0);
      if (size === 0) return;
      const handle = await open(this.file, 'r');
      try {
        const last = Buffer.alloc(1);
        await handle.read(last, 0, 1, size - 1);
        if (last[0] !== 0x0a) this.prefix = '\n';
      } finally {
        await handle.close();
      }
    })();
    // A failed open (folder not creatable yet) is tried again by the next write.
    this.ready.catch(() => { this.ready = undefined; });
    return this.ready;
  }

  /** Queues one record; the write happens in the background. */
  append(record: LedgerRecord): void {
    this.pending.push(`${JSON.stringify(record)}\n`);
    if (this.pending.length > this.maxPending) {
      const dropped = this.pending.splice(0, this.pending.length - this.maxPending).length;
      this.logger.error({ dropped, file: this.file }, 'token ledger writes keep failing; dropped the oldest queued records');
    }
    this.writing ??= this.drain();
  }

  /** Resolves once every record appended so far is on disk (or its write failed and was logged). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.pending.length) {
      this.writing = this.drain();
      await this.writing;
    }
  }

  /** Writes what is queued and closes the file (shutdown). */
  async close(): Promise<void> {
    await this.flush();
    this.out.close();
  }

  /** Reads every record in file order (skipping torn or foreign lines). */
  async scan(onRecord: (record: LedgerRecord) => void): Promise<number> {
    await this.flush();
    let skipped = 0;
    let count = 0;
    try {
      const lines = createInterface({ input: createReadStream(this.file, { encoding: 'utf8' }), crlfDelay: Infinity });
      for await (const line of lines) {
        const record = parseLedgerLine(line);
        if (record) {
          onRecord(record);
          count++;
        } else if (line.trim()) skipped++;
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (skipped) this.logger.warn({ skipped, file: this.file }, 'skipped unreadable token ledger lines (a torn write?)');
    return count;
  }

  /**
   * The newest records matching `filter`, newest first, reading the file backwards in chunks so that
   * only as much is read as the answer needs. `contains` (a JSON fragment every match holds) skips other
   * lines without parsing them.
   */
  async readBackwards(filter: (record: LedgerRecord) => boolean, limit: number, options: { contains?: string } = {}): Promise<LedgerRecord[]> {
    await this.flush();
    const found: LedgerRecord[] = [];
    if (limit <= 0) return found;
    let handle;
    try {
      handle = await open(this.file, 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return found;
      throw error;
    }
    try {
      let position = (await handle.stat()).size;
      let carry = Buffer.alloc(0);
      const needle = options.contains ? Buffer.from(options.contains, 'utf8') : undefined;
      const take = (bytes: Buffer): boolean => {
        // A cheap byte search first: most lines of a big ledger belong to other sessions.
        if (needle && bytes.indexOf(needle) < 0) return false;
        const record = parseLedgerLine(bytes.toString('utf8'));
        if (record && filter(record)) found.push(record);
        return found.length >= limit;
      };
      while (position > 0) {
        const length = Math.min(CHUNK, position);
        position -= length;
        const chunk = Buffer.alloc(length);
        await handle.read(chunk, 0, length, position);
        const buffer = carry.length ? Buffer.concat([chunk, carry]) : chunk;
        let end = buffer.length;
        for (let i = buffer.length - 1; i >= 0; i--) {
          if (buffer[i] !== 0x0a) continue;
          if (end > i + 1 && take(buffer.subarray(i + 1, end))) return found;
          end = i;
        }
        carry = Buffer.from(buffer.subarray(0, end));
      }
      if (carry.length) take(carry);
      return found;
    } finally {
      await handle.close();
    }
  }

  private async drain(): Promise<void> {
    try {
      await this.open();
      while (this.pending.length) {
        const batch = this.pending;
        this.pending = [];
        const text = this.prefix + batch.join('');
        try {
          this.out.append(text);
          this.prefix = '';
        } catch (error) {
          this.pending = [...batch, ...this.pending];
          this.logger.error({ err: error, file: this.file, queued: this.pending.length }, 'could not append to the token ledger; will retry with the next record or at shutdown');
          return;
        }
      }
    } catch (error) {
      this.logger.error({ err: error, file: this.file }, 'could not open the token ledger');
    } finally {
      this.writing = undefined;
    }
  }
}
