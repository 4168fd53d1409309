import { existsSync, readFileSync, renameSync, writeFileSync, mkdirSync } from 'node:fs';
import { AppendOnlyFile } from '../core/append-only-file.ts';
import path from 'node:path';
import type { Clock } from '../core/clock.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';

/** The id under which a platform delivery is deduplicated: `<channel>:<account>:<delivery or message id>`. */
export function deliveryKey(message: InboundMessage): string {
  return `${message.channel}:${message.accountId}:${message.deliveryId ?? message.id}`;
}

type Record =
  | { op: 'in'; key: string; at: number; message: InboundMessage; correlationId: string; sent?: number }
  | { op: 'done'; key: string; at: number }
  | { op: 'seen'; key: string; at: number }
  /** How many of the message's replies the platform has accepted so far. */
  | { op: 'sent'; key: string; at: number; count: number }
  /** The messages posted so far for the message's live reply (SPEC §16), edited into the answer by a replay. */
  | { op: 'live'; key: string; at: number; ids: string[] };

/** A message accepted but not finished, as replayed at start. */
export interface PendingMessage {
  message: InboundMessage;
  correlationId: string;
  /** Replies already delivered before the stop (a replay does not send them again). */
  sent?: number;
  /** Messages of a live reply already posted (a replay edits them instead of posting a copy). */
  live?: string[];
}

/** Options of {@link Inbox}. */
export interface InboxOptions {
  file: string;
  clock: Clock;
  logger: Logger;
  /** How long a processed delivery id is remembered for dedupe (default 48 h). */
  dedupeWindowMs?: number;
  /** At most this many remembered ids (default 50,000). */
  maxSeen?: number;
}

/**
 * A journal of accepted platform messages (`<stateDir>/inbox.jsonl`). A message is written before the
 * platform is acknowledged and marked done once answered, so a crash or a stop mid-queue loses nothing:
 * pending messages are replayed at the next start. The same journal remembers delivery ids, so a
 * redelivery (Telegram `update_id`, Slack `event_id`, Discord message id) is processed once, across restarts.
 */
export class Inbox {
  private readonly options: InboxOptions;
  private readonly seen = new Map<string, number>();
  private readonly pending = new Map<string, PendingMessage>();
  private readonly claimed = new Set<string>();
  private out?: AppendOnlyFile;
  private appendsSinceCompaction = 0;

  constructor(options: InboxOptions) {
    this.options = options;
  }

  /** Reads the journal, keeps what is pending and recent, and rewrites it compacted. Returns the pending messages. */
  open(): PendingMessage[] {
    const { file } = this.options;
    mkdirSync(path.dirname(file), { recursive: true });
    if (existsSync(file)) {
      const lines = readFileSync(file, 'utf8').split('\n');
      for (const [i, line] of lines.entries()) {
        if (!line.trim()) continue;
        let record: Record;
        try {
          record = JSON.parse(line) as Record;
        } catch {
          if (i < lines.length - 1 && lines.slice(i + 1).some((l) => l.trim())) this.options.logger.warn({ file, line: i + 1 }, 'inbox: skipped an unreadable line');
          continue;
        }
        this.apply(record);
      }
    }
    this.compact();
    return [...this.pending.values()];
  }

  /** True when this delivery was already accepted (processed, pending, or being decided right now). */
  has(message: InboundMessage): boolean {
    const key = deliveryKey(message);
    return this.seen.has(key) || this.pending.has(key) || this.claimed.has(key);
  }

  /**
   * Claims a delivery synchronously, before any await, so that a copy submitted at the same moment is seen
   * as a duplicate. Returns false when it was already claimed or known. Settle with accept, markSeen or unclaim.
   */
  claim(message: InboundMessage): boolean {
    if (this.has(message)) return false;
    this.claimed.add(deliveryKey(message));
    return true;
  }

  /** Gives a claim back (the message was not taken in, e.g. it could not be routed). */
  unclaim(message: InboundMessage): void {
    this.claimed.delete(deliveryKey(message));
  }

  /** Records an accepted message; resolves once it is written. */
  async accept(message: InboundMessage, correlationId: string): Promise<void> {
    const { raw: _raw, ...stored } = message;
    const record: Record = { op: 'in', key: deliveryKey(message), at: this.options.clock.now(), message: stored, correlationId };
    this.apply(record);
    await this.write(record);
  }

  /** Records that the first `count` replies of a pending message reached the platform. */
  async sent(message: InboundMessage, count: number): Promise<void> {
    const record: Record = { op: 'sent', key: deliveryKey(message), at: this.options.clock.now(), count };
    if (!this.pending.has(record.key)) return;
    this.apply(record);
    await this.write(record);
  }

  /** Records the messages posted so far for a pending message's live reply. */
  async live(message: InboundMessage, ids: readonly string[]): Promise<void> {
    const record: Record = { op: 'live', key: deliveryKey(message), at: this.options.clock.now(), ids: [...ids] };
    if (!this.pending.has(record.key)) return;
    this.apply(record);
    await this.write(record);
  }

  /** Marks a message answered (or given up on). */
  async done(message: InboundMessage): Promise<void> {
    const record: Record = { op: 'done', key: deliveryKey(message), at: this.options.clock.now() };
    this.apply(record);
    await this.write(record);
    if (++this.appendsSinceCompaction > 20_000 && this.pending.size < 1000) this.compact();
  }

  /** Remembers a delivery id without journaling a message (non-durable channels). */
  markSeen(message: InboundMessage): void {
    const key = deliveryKey(message);
    this.claimed.delete(key);
    this.seen.set(key, this.options.clock.now());
  }

  /** Journals a delivery that was refused (rate limit), so a redelivery is not processed after a restart either. */
  async refuse(message: InboundMessage): Promise<void> {
    const record: Record = { op: 'seen', key: deliveryKey(message), at: this.options.clock.now() };
    this.apply(record);
    await this.write(record);
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  async close(): Promise<void> {
    this.out?.close();
    this.out = undefined;
  }

  private apply(record: Record): void {
    this.claimed.delete(record.key);
    if (record.op === 'in') {
      this.pending.set(record.key, { message: record.message, correlationId: record.correlationId, ...(record.sent ? { sent: record.sent } : {}) });
    } else if (record.op === 'sent') {
      const pending = this.pending.get(record.key);
      if (pending) pending.sent = Math.max(pending.sent ?? 0, record.count);
    } else if (record.op === 'live') {
      const pending = this.pending.get(record.key);
      if (pending && record.ids.length >= (pending.live?.length ?? 0)) pending.live = record.ids;
    } else {
      this.pending.delete(record.key);
      this.seen.delete(record.key);
      this.seen.set(record.key, record.at);
      this.trimSeen();
    }
  }

  private trimSeen(): void {
    const max = this.options.maxSeen ?? 50_000;
    const cutoff = this.options.clock.now() - (this.options.dedupeWindowMs ?? 48 * 3_600_000);
    for (const [key, at] of this.seen) {
      if (this.seen.size <= max && at >= cutoff) break;
      this.seen.delete(key);
    }
  }

  private async write(record: Record): Promise<void> {
    this.out ??= new AppendOnlyFile(this.options.file);
    this.out.append(`${JSON.stringify(record)}\n`);
  }

  /** Rewrites the journal with only pending messages and recent delivery ids. */
  private compact(): void {
    this.trimSeen();
    const lines: string[] = [];
    for (const [key, at] of this.seen) lines.push(JSON.stringify({ op: 'seen', key, at }));
    for (const [key, p] of this.pending) lines.push(JSON.stringify({ op: 'in', key, at: p.message.receivedAt, message: p.message, correlationId: p.correlationId, ...(p.sent ? { sent: p.sent } : {}) }));
    for (const [key, p] of this.pending) if (p.live?.length) lines.push(JSON.stringify({ op: 'live', key, at: p.message.receivedAt, ids: p.live }));
    const tmp = `${this.options.file}.tmp`;
    this.out?.close();
    this.out = undefined;
    writeFileSync(tmp, lines.length ? `${lines.join('\n')}\n` : '');
    renameSync(tmp, this.options.file);
    this.appendsSinceCompaction = 0;
  }
}
