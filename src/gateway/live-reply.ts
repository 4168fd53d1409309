import type { LiveReplyCalls } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import type { Logger } from '../core/logger.ts';
import type { DeliveryTarget, OutboundMessage } from '../core/message.ts';

/** Timers of the cadence (tests pass their own, so nothing sleeps). */
export interface LiveTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemTimers: LiveTimers = {
  setTimeout: (fn, ms) => { const t = setTimeout(fn, ms); t.unref(); return t; },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** When the last post or edit of a chat started, shared by every live reply (the edit limit is per chat). */
export type ChatPace = Map<string, number>;

/** Options of {@link LiveReply}. */
export interface LiveReplyOptions {
  calls: LiveReplyCalls;
  target: DeliveryTarget;
  /** The message answered (the first part replies to it where the platform shows that). */
  replyTo?: string;
  threadId?: string;
  /** `partial`: the answer as it grows; `progress`: one status line, replaced by the answer. */
  mode: 'partial' | 'progress';
  /** The first part is posted once the answer has this many characters… */
  minChars: number;
  /** …or this long after its first character. */
  firstAfterMs: number;
  /** At most one post or edit per chat this often. */
  intervalMs: number;
  clock: Clock;
  timers: LiveTimers;
  /** Shared between the live replies of one gateway. */
  pace: ChatPace;
  /** Messages already posted for this reply (a replay after a crash edits them instead of posting copies). */
  posted?: readonly string[];
  /** Called with every message id posted so far after each new post (the journal). */
  onPosted?: (ids: readonly string[]) => Promise<void>;
  logger: Logger;
}

/** Counters of one live reply (tests and the benchmark read them). */
export interface LiveReplyStats {
  posts: number;
  edits: number;
  /** Epoch ms when the first text (or status) became visible. */
  firstVisibleAt?: number;
}

/**
 * One reply shown while it is written (SPEC §16). Fed with the answer's text as it streams (`partial`) or
 * with a status line (`progress`); posts the first part once there is enough to show, then edits it at most
 * once per `intervalMs` per chat, one call at a time (a call the platform slows down, a 429 waited out by the
 * channel's retries, delays the next one instead of piling up). Every call carries the whole text rendered
 * again, so what the chat shows is valid markup at every step; `finish` makes it the complete answer,
 * continuing in new messages where it does not fit in one.
 */
export class LiveReply {
  readonly stats: LiveReplyStats = { posts: 0, edits: 0 };
  private text = '';
  private status?: string;
  private readonly ids: string[];
  /** What each posted message shows now ('' for one posted before a restart: unknown, so edited). */
  private readonly shown: string[];
  private busy?: Promise<void>;
  private timer?: unknown;
  /** When the armed timer fires. */
  private timerAt = Infinity;
  private firstTextAt?: number;
  private closed = false;
  /** A post failed: nothing more is shown live, and `finish` leaves the reply to an ordinary send. */
  private broken = false;

  constructor(private readonly options: LiveReplyOptions) {
    this.ids = [...(options.posted ?? [])];
    this.shown = this.ids.map(() => '');
  }

  /** The ids of the messages posted so far. */
  get posted(): readonly string[] {
    return this.ids;
  }

  /** `partial`: more of the answer. */
  append(delta: string): void {
    if (this.closed || !delta) return;
    this.text += delta;
    if (this.firstTextAt === undefined && this.text.trim()) this.firstTextAt = this.options.clock.now();
    this.schedule();
  }

  /** `progress`: the status line to show now ("thinking…", "running memory_search…"). */
  setStatus(line: string): void {
    if (this.closed || line === this.status) return;
    this.status = line;
    this.firstTextAt ??= this.options.clock.now();
    this.schedule();
  }

  /**
   * Shows the complete reply: the posted messages edited into its parts, new messages for the rest. Resolves
   * false when nothing was posted (the reply is then sent the ordinary way); rejects when the platform did
   * not take the final calls, after the channel's retries.
   */
  async finish(reply: OutboundMessage): Promise<boolean> {
    this.stop();
    await this.busy;
    if (this.ids.length === 0 || this.broken) return false;
    const parts = this.options.calls.render(reply);
    try {
      await this.show(parts, true);
    } finally {
      await this.end();
    }
    return true;
  }

  /** Stops showing more (the turn failed or was stopped); what is shown stays. */
  async abandon(): Promise<void> {
    this.stop();
    await this.busy;
    await this.end();
  }

  /** Closes the posted messages' native streams (where the platform has them); what they show stays. */
  private async end(): Promise<void> {
    const { calls, target, logger } = this.options;
    if (!calls.end) return;
    for (const id of this.ids) {
      await calls.end(target, id).catch((err: unknown) => logger.warn({ err }, 'live reply: the platform did not close a streamed message'));
    }
  }

  private stop(): void {
    this.closed = true;
    if (this.timer !== undefined) this.options.timers.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private get paceKey(): string {
    const t = this.options.target;
    return `${t.channel}:${t.accountId}:${t.chatId}`;
  }

  /** Arms the timer of the next call, unless an earlier one is armed or a call runs (that one re-arms when it ends). */
  private schedule(): void {
    if (this.closed || this.broken || this.busy) return;
    const { clock, minChars, firstAfterMs, intervalMs, pace } = this.options;
    const now = clock.now();
    let due: number;
    if (this.ids.length === 0 && this.options.mode === 'partial') {
      if (this.firstTextAt === undefined) return;
      due = this.text.trim().length >= minChars ? now : this.firstTextAt + firstAfterMs;
    } else {
      due = now;
    }
    due = Math.max(due, now, (pace.get(this.paceKey) ?? -Infinity) + intervalMs);
    if (this.timer !== undefined) {
      if (this.timerAt <= due) return;
      this.options.timers.clearTimeout(this.timer);
    }
    this.timerAt = due;
    this.timer = this.options.timers.setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.tick();
    }, due - now);
  }

  private tick(): void {
    if (this.closed || this.busy) return;
    // Another live reply in this chat took the slot meanwhile.
    if (this.options.clock.now() < (this.options.pace.get(this.paceKey) ?? -Infinity) + this.options.intervalMs) return this.schedule();
    const parts = this.options.calls.render({ text: this.current() });
    if (parts.length === 0 || parts.every((p, i) => this.shown[i] === p)) return;
    const started = this.options.clock.now();
    this.options.pace.set(this.paceKey, started);
    this.busy = this.show(parts, false)
      .catch((error: unknown) => this.options.logger.warn({ err: error }, 'live reply: the platform did not take an update; the final answer follows'))
      .finally(() => {
        this.busy = undefined;
        // A call the platform held back (a 429 waited out) counts from its end: the next waits a whole interval.
        const now = this.options.clock.now();
        if (now - started > this.options.intervalMs) this.options.pace.set(this.paceKey, now);
        this.schedule();
      });
  }

  /** What the reply shows while it is written. */
  private current(): string {
    return this.options.mode === 'progress' ? this.status ?? '' : this.text;
  }

  /** Edits posted messages whose text changed, posts the parts past them. */
  private async show(parts: readonly string[], final: boolean): Promise<void> {
    const { calls, target } = this.options;
    for (const [i, part] of parts.entries()) {
      if (i < this.ids.length) {
        if (this.shown[i] === part) continue;
        await calls.edit(target, this.ids[i]!, part);
        this.shown[i] = part;
        this.stats.edits++;
        continue;
      }
      let id: string;
      try {
        id = await calls.post(target, part, { ...(i === 0 && this.options.replyTo ? { replyTo: this.options.replyTo } : {}), ...(this.options.threadId ? { threadId: this.options.threadId } : {}) });
      } catch (error) {
        if (!final && this.ids.length === 0) this.broken = true;
        throw error;
      }
      this.ids.push(id);
      this.shown.push(part);
      this.stats.posts++;
      this.stats.firstVisibleAt ??= this.options.clock.now();
      await this.options.onPosted?.(this.ids)?.catch((err: unknown) => this.options.logger.warn({ err }, 'live reply: could not journal a posted message id'));
    }
    if (final && parts.length < this.ids.length) {
      this.options.logger.warn({ posted: this.ids.length, parts: parts.length }, 'live reply: the final answer needs fewer messages than were posted; the rest keep their text');
    }
  }
}
