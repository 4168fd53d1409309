import { closeSync, createReadStream, open as openCallback, writeSync } from 'node:fs';
import { mkdir, open, readdir, rename, stat, unlink } from 'node:fs/promises';
import { AppendOnlyFile } from '../core/append-only-file.ts';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from '../core/logger.ts';
import type { MediaRecord } from '../core/message.ts';

/** A tool call the assistant asked for. */
export interface ToolCall {
  id: string;
  name: string;
  /** JSON-encoded arguments, as the provider sent them. */
  arguments: string;
}

/** The first line of every transcript file. */
export interface TranscriptHeader {
  type: 'session';
  version: 1;
  sessionId: string;
  key: string;
  createdAt: string;
}

/** One message of a conversation. */
export interface TranscriptMessage {
  type: 'message';
  id: string;
  role: 'user' | 'assistant' | 'tool';
  content: string;
  toolCalls?: ToolCall[];
  toolCallId?: string;
  /** ISO time. */
  at: string;
  correlationId?: string;
  /** Sender name for group messages. */
  name?: string;
  /** For a user entry: the delivery it came from (`<channel>:<account>:<id>`), so a replay never appends it twice. */
  sourceId?: string;
  /** For a user entry: what each attachment became for the model (SPEC §15). */
  media?: MediaRecord[];
  /** For an assistant entry: the partial answer of a turn a newer message stopped (queue mode `interrupt`). */
  interrupted?: true;
}

/** Marks older history as summarized; later contexts use the summary and the entries from `firstKeptId`. */
export interface TranscriptCompaction {
  type: 'compaction';
  id: string;
  summary: string;
  firstKeptId: string;
  tokensBefore: number;
  tokensAfter: number;
  at: string;
  /**
   * The summary is one more block after those of the compactions before it: it covers only the messages from
   * the previous compaction's `firstKeptId` up to this one's. Absent: it replaces every earlier summary (a
   * merge of the blocks, or an entry written before blocks existed, which holds one cumulative summary).
   */
  appended?: true;
}

export type TranscriptEntry = TranscriptMessage | TranscriptCompaction;


/** Reads and writes `<dir>/<sessionId>.jsonl` (SPEC §4). */
export interface TranscriptStore {
  /** Creates the file with its header if it does not exist yet. */
  create(sessionId: string, key: string, at: Date): Promise<void>;
  append(sessionId: string, entries: TranscriptEntry | TranscriptEntry[]): Promise<void>;
  /** Every entry, in order. A torn last line is skipped with a warning. */
  read(sessionId: string): Promise<TranscriptEntry[]>;
  /** Renames the file to `<sessionId>.jsonl.reset.<UTC timestamp>`. Returns the new path. */
  archive(sessionId: string, at: Date): Promise<string | undefined>;
  /** Deletes archives older than `maxAgeMs`. Returns how many were deleted. */
  pruneArchives(now: Date, maxAgeMs: number): Promise<number>;
  pathOf(sessionId: string): string;
}

/** JSONL transcripts with a small read cache for recently active sessions. */
export class JsonlTranscriptStore implements TranscriptStore {
  private readonly dir: string;
  private readonly logger: Logger;
  private readonly cache = new Map<string, TranscriptEntry[]>();
  private readonly cacheLimit: number;
  private readonly files = new Map<string, AppendOnlyFile>();
  private readonly handleLimit: number;
  /** Sessions whose file end was checked for a torn line in this process. */
  private readonly checkedTails = new Set<string>();
  private dirReady?: Promise<unknown>;
  /** The checked file path of recent session ids (every append and read asks). */
  private readonly paths = new Map<string, string>();

  constructor(options: { dir: string; logger: Logger; cacheLimit?: number; handleLimit?: number }) {
    this.dir = options.dir;
    this.logger = options.logger;
    this.cacheLimit = options.cacheLimit ?? 256;
    this.handleLimit = Math.max(1, options.handleLimit ?? 64);
  }

  pathOf(sessionId: string): string {
    let file = this.paths.get(sessionId);
    if (file === undefined) {
      if (!/^[A-Za-z0-9_-]+$/.test(sessionId)) throw new Error(`Invalid session id "${sessionId}".`);
      file = path.join(this.dir, `${sessionId}.jsonl`);
      if (this.paths.size >= 4096) this.paths.clear();
      this.paths.set(sessionId, file);
    }
    return file;
  }

  async create(sessionId: string, key: string, at: Date): Promise<void> {
    await this.ensureDir();
    const header: TranscriptHeader = { type: 'session', version: 1, sessionId, key, createdAt: at.toISOString() };
    const file = this.pathOf(sessionId);
    let fd: number;
    try {
      // Creating a file costs the file system a journal entry (some 100+ µs on ext4): done on the thread pool,
      // not on the event loop every session start would otherwise stall. The descriptor is kept for the
      // appends (a raw fd: a FileHandle costs more to make than the write it serves).
      fd = await createExclusive(file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      return;
    }
    const text = Buffer.from(`${JSON.stringify(header)}\n`, 'utf8');
    try {
      let offset = 0;
      while (offset < text.length) offset += writeSync(fd, text, offset, text.length - offset);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    this.adoptFile(sessionId, new AppendOnlyFile(file, fd));
    this.remember(sessionId, []);
    this.checkedTails.add(sessionId);
  }

  async append(sessionId: string, entries: TranscriptEntry | TranscriptEntry[]): Promise<void> {
    const list = Array.isArray(entries) ? entries : [entries];
    if (list.length === 0) return;
    await this.ensureDir();
    const file = this.pathOf(sessionId);
    const lead = this.checkedTails.has(sessionId) ? '' : await this.tailRepair(file);
    this.fileFor(sessionId, file).append(lead + list.map((e) => `${JSON.stringify(e)}\n`).join(''));
    this.checkedTails.add(sessionId);
    const cached = this.cache.get(sessionId);
    if (cached) {
      cached.push(...list);
      this.remember(sessionId, cached);
    }
  }

  async read(sessionId: string): Promise<TranscriptEntry[]> {
    const cached = this.cache.get(sessionId);
    if (cached) {
      this.remember(sessionId, cached);
      return cached.slice();
    }
    const entries = await this.readFile(this.pathOf(sessionId));
    this.remember(sessionId, entries);
    return entries.slice();
  }

  async archive(sessionId: string, at: Date): Promise<string | undefined> {
    this.forget(sessionId);
    const from = this.pathOf(sessionId);
    const to = `${from}.reset.${archiveStamp(at)}`;
    try {
      await rename(from, to);
      return to;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async pruneArchives(now: Date, maxAgeMs: number): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return 0;
    }
    let deleted = 0;
    for (const name of names) {
      const m = /\.jsonl\.reset\.(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:-\d{3})?Z)$/.exec(name);
      if (!m) continue;
      const at = parseArchiveStamp(m[1] as string);
      if (Number.isNaN(at) || now.getTime() - at <= maxAgeMs) continue;
      await unlink(path.join(this.dir, name)).then(() => deleted++, () => undefined);
    }
    return deleted;
  }

  /** Drops a session's cached entries (eviction). */
  forget(sessionId: string): void {
    this.cache.delete(sessionId);
    this.checkedTails.delete(sessionId);
    this.closeFile(sessionId);
  }

  /** Closes every open transcript file (shutdown). */
  async close(): Promise<void> {
    for (const id of [...this.files.keys()]) this.closeFile(id);
  }

  /**
   * The append-mode file of a recently active session, kept open (at most `handleLimit`), so a turn's appends
   * cost a write each instead of an open, a write and a close.
   */
  private fileFor(sessionId: string, file: string): AppendOnlyFile {
    const open = this.files.get(sessionId);
    if (open) {
      this.files.delete(sessionId);
      this.files.set(sessionId, open);
      return open;
    }
    return this.adoptFile(sessionId, new AppendOnlyFile(file));
  }

  private adoptFile(sessionId: string, file: AppendOnlyFile): AppendOnlyFile {
    this.closeFile(sessionId);
    this.files.set(sessionId, file);
    while (this.files.size > this.handleLimit) this.closeFile(this.files.keys().next().value as string);
    return file;
  }

  private closeFile(sessionId: string): void {
    const open = this.files.get(sessionId);
    if (!open) return;
    this.files.delete(sessionId);
    open.close();
  }

  /** A file left without a final newline (a torn write) gets one, so the next entry starts on its own line. */
  private async tailRepair(file: string): Promise<string> {
    let handle;
    try {
      handle = await open(file, 'r');
    } catch {
      return '';
    }
    try {
      const { size } = await handle.stat();
      if (size === 0) return '';
      const last = Buffer.alloc(1);
      await handle.read(last, 0, 1, size - 1);
      return last[0] === 0x0a ? '' : '\n';
    } finally {
      await handle.close();
    }
  }

  private remember(sessionId: string, entries: TranscriptEntry[]): void {
    this.cache.delete(sessionId);
    this.cache.set(sessionId, entries);
    while (this.cache.size > this.cacheLimit) {
      const oldest = this.cache.keys().next().value as string;
      this.cache.delete(oldest);
    }
  }

  private async readFile(file: string): Promise<TranscriptEntry[]> {
    try {
      await stat(file);
    } catch {
      return [];
    }
    const entries: TranscriptEntry[] = [];
    const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
    let lineNo = 0;
    let pendingBad: { lineNo: number; text: string } | undefined;
    for await (const line of lines) {
      lineNo++;
      if (!line.trim()) continue;
      if (pendingBad) {
        // A bad line followed by more lines is corruption in the middle, not a torn write.
        this.logger.warn({ file, line: pendingBad.lineNo }, 'transcript: skipped an unreadable line');
        pendingBad = undefined;
      }
      let value: { type?: string };
      try {
        value = JSON.parse(line) as { type?: string };
      } catch {
        pendingBad = { lineNo, text: line };
        continue;
      }
      if (value.type === 'message' || value.type === 'compaction') entries.push(value as TranscriptEntry);
    }
    if (pendingBad) this.logger.warn({ file, line: pendingBad.lineNo }, 'transcript: skipped a torn last line (the process stopped mid-write)');
    return entries;
  }

  private ensureDir(): Promise<unknown> {
    this.dirReady ??= mkdir(this.dir, { recursive: true });
    return this.dirReady;
  }
}

/** Creates `file` (refusing an existing one: EEXIST) open for appending; the open runs on the thread pool. */
function createExclusive(file: string): Promise<number> {
  return new Promise((resolve, reject) => {
    openCallback(file, 'ax', (error, fd) => (error ? reject(error) : resolve(fd)));
  });
}

/** `2026-11-30T04-00-00-000Z`: an ISO time that is a valid file name everywhere. */
export function archiveStamp(at: Date): string {
  return at.toISOString().replace(/:/g, '-').replace('.', '-');
}

function parseArchiveStamp(stamp: string): number {
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})-(\d{2})(?:-(\d{3}))?Z$/.exec(stamp);
  if (!m) return Number.NaN;
  return Date.parse(`${m[1]}T${m[2]}:${m[3]}:${m[4]}.${m[5] ?? '000'}Z`);
}
