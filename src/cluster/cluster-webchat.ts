import type pg from 'pg';
import type { TurnEvents } from '../agent/turn-events.ts';
import type { TurnResult } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import { outboundText, type InternalRoute } from '../core/message.ts';
import { isQuietHeartbeat } from '../scheduler/heartbeat.ts';
import type { ClusterListener } from './cluster-listener.ts';

/** A later reply as the web chat's pages get it (the shape of `WebchatLaterReply` in `src/http/webchat-routes.ts`). */
export interface RelayedReply {
  text: string;
  /** Files in the media store (readable from any replica); a file only on the other replica's disk is left out. */
  files?: { name: string; mime: string; size: number; sha256: string }[];
  kind: string;
  /** When its turn was done (epoch ms, the database's clock). */
  at: number;
}

/** One open page of a web chat user. */
export interface RelayListener {
  reply(push: RelayedReply): void;
  close(): void;
}

/** Options of {@link ClusterWebchatRelay}. */
export interface ClusterWebchatRelayOptions {
  pool: pg.Pool;
  listener: ClusterListener;
  /** This replica (its own {@link ClusterWebchatRelay.publish}es are left to its own pages). */
  replicaId: string;
  logger: Logger;
  /** This replica's turn events: the internal turns it runs itself, whose replies its own web chat already handed out. */
  events: TurnEvents;
  /** How often finished messages are looked up while a page listens, for missed notifications (`cluster.pollMs`). */
  pollMs: number;
  /** How far back each look-up reaches past the newest row it saw, for rows committed late (default 10 s). */
  overlapMs?: number;
  /** Gathers `sb_done` notifications this long into one look-up (default 20 ms). */
  debounceMs?: number;
  /** How long the ids of turns this replica ran are kept (default 1 h). */
  localTurnsKeepMs?: number;
}

interface DoneRow { session_key: string; seq: number; correlation_id: string; internal: InternalRoute | null; result: TurnResult | null; done_at: string }
/** A reply another replica published for a user whose request went away. */
interface PublishedRow { id: number; user_id: string; push: Omit<RelayedReply, 'at'>; at: string }

/**
 * The database's now, the finished messages that answer into the web chat with their results (the replies), done
 * after `$1` (after now less `$2` ms when `$1` is null), and the replies other replicas published since then
 * (`sb_webchat_reply`, not this replica's `$3`). Rows of `sb_inbox` are kept 24 h after they are done, and
 * `done_at` is indexed (`sb_inbox_done`), as `sb_webchat_reply.at` is.
 */
const DONE_FOR_WEBCHAT = `
SELECT now() AS now, (
  SELECT coalesce(json_agg(x ORDER BY x.done_at), '[]'::json) FROM (
    SELECT session_key, seq, correlation_id, message->'internal' AS internal, result, done_at FROM sb_inbox
    WHERE done_at > coalesce($1::timestamptz, now() - make_interval(secs => $2::double precision / 1000))
      AND message->'internal'->'deliverTo'->>'channel' = 'webchat'
  ) x) AS rows, (
  SELECT coalesce(json_agg(p ORDER BY p.id), '[]'::json) FROM (
    SELECT id, user_id, push, at FROM sb_webchat_reply
    WHERE at > coalesce($1::timestamptz, now() - make_interval(secs => $2::double precision / 1000)) AND replica <> $3
  ) p) AS published`;

/** Publishes a reply for the other replicas' pages (and drops those older than an hour). */
const PUBLISH = `
WITH old AS (DELETE FROM sb_webchat_reply WHERE at < now() - interval '1 hour'),
ins AS (INSERT INTO sb_webchat_reply (user_id, push, replica) VALUES ($1, $2, $3) RETURNING id)
SELECT pg_notify('sb_webchat', '') FROM ins`;

/**
 * Later web chat replies across replicas (SPEC §13). In cluster mode a web chat request's own turn runs on the
 * replica it came to, but the work it starts (a goal's background batches, a sub-agent's result, a job that
 * answers into the web chat) is queued as internal messages that any replica runs; that replica's web chat
 * hands the replies only to the pages connected to it. This relay hands them to the pages connected here.
 *
 * The replies are read from the database, never from the notification: a finished message's result (its
 * replies) is committed with its `done_at` in `sb_inbox`. `sb_done` makes the look-up immediate; while any page
 * listens, the same look-up also runs every `pollMs` and after the listener reconnects, reaching `overlapMs`
 * back past the newest row seen, so a missed notification delays a reply by at most `pollMs` and never loses
 * it. Each `(session, seq)` is handed out once; rows of turns this replica ran itself are skipped (its own web
 * chat handed those out). A page that was not open gets nothing pushed: the transcript has every reply, and a
 * page shows it when it loads.
 */
export class ClusterWebchatRelay {
  private readonly options: ClusterWebchatRelayOptions;
  private readonly pages = new Map<string, Set<RelayListener>>();
  /** Correlation ids of internal turns this replica ran, with when they started. */
  private readonly localTurns = new Map<string, number>();
  /** Rows handed out (or skipped), by `key\0seq`, with their `done_at`. */
  private readonly seen = new Map<string, number>();
  /** The database's now at the last look-up; undefined while nobody listens (the next page starts from then). */
  private since: number | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private soonTimer: NodeJS.Timeout | undefined;
  private looking: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private readonly unsubscribe: () => void;

  constructor(options: ClusterWebchatRelayOptions) {
    this.options = options;
    this.unsubscribe = options.events.subscribe({
      onTurnStart: (event) => { if (event.channel === 'internal') this.rememberLocal(event.correlationId); },
    });
    options.listener.on('sb_done', () => { if (this.pages.size) this.lookSoon(); });
    options.listener.on('sb_webchat', () => { if (this.pages.size) this.lookSoon(); });
    options.listener.onConnect(() => { if (this.pages.size) this.lookSoon(); });
  }

  /** Pages listening here. */
  get pageCount(): number {
    let n = 0;
    for (const set of this.pages.values()) n += set.size;
    return n;
  }

  /** Hands `user`'s later replies run on other replicas to `listener` until the returned function is called. */
  subscribe(user: string, listener: RelayListener): () => void {
    if (this.closed) {
      listener.close();
      return () => undefined;
    }
    let set = this.pages.get(user);
    if (!set) this.pages.set(user, (set = new Set()));
    set.add(listener);
    this.startPolling();
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.pages.get(user) === set) this.pages.delete(user);
      if (this.pages.size === 0) this.stopPolling();
    };
  }

  /**
   * A reply this replica could not hand to the request that asked (its page went away) and gave its own pages of
   * `user`: the user's pages on the other replicas get it too. Files only on this replica's disk are left out.
   */
  publish(user: string, reply: { text: string; kind: string; files?: { name: string; mime: string; size: number; sha256?: string }[] }): void {
    const files = (reply.files ?? []).flatMap((f) => (f.sha256 ? [{ name: f.name, mime: f.mime, size: f.size, sha256: f.sha256 }] : []));
    const push = { text: reply.text, kind: reply.kind, ...(files.length ? { files } : {}) };
    this.options.pool.query(PUBLISH, [user, JSON.stringify(push), this.options.replicaId])
      .catch((err: unknown) => this.options.logger.warn({ err }, 'could not pass a web chat reply on to the other replicas\' pages'));
  }

  /** Ends every page's relay and stops looking. */
  close(): void {
    this.closed = true;
    this.unsubscribe();
    this.stopPolling();
    for (const set of this.pages.values()) for (const l of set) l.close();
    this.pages.clear();
  }

  /** Looks for finished rows now (also what the timers call); one look-up at a time, another after it when asked meanwhile. */
  async lookNow(): Promise<void> {
    if (this.looking) {
      this.again = true;
      return this.looking;
    }
    this.looking = (async () => {
      try {
        do {
          this.again = false;
          await this.look();
        } while (this.again && !this.closed && this.pages.size);
      } finally {
        this.looking = undefined;
      }
    })();
    return this.looking;
  }

  private startPolling(): void {
    if (this.pollTimer || this.closed) return;
    const tick = () => {
      void this.lookNow();
      if (this.pages.size && !this.closed) this.pollTimer = setTimeout(tick, this.options.pollMs).unref();
    };
    this.pollTimer = setTimeout(tick, 0).unref();
  }

  private stopPolling(): void {
    clearTimeout(this.pollTimer);
    clearTimeout(this.soonTimer);
    this.pollTimer = undefined;
    this.soonTimer = undefined;
    this.since = undefined;
    this.seen.clear();
  }

  private lookSoon(): void {
    if (this.soonTimer || this.closed) return;
    this.soonTimer = setTimeout(() => {
      this.soonTimer = undefined;
      void this.lookNow();
    }, this.options.debounceMs ?? 20);
    this.soonTimer.unref();
  }

  private rememberLocal(correlationId: string): void {
    const now = Date.now();
    this.localTurns.delete(correlationId);
    this.localTurns.set(correlationId, now);
    const keep = this.options.localTurnsKeepMs ?? 3_600_000;
    for (const [id, at] of this.localTurns) {
      if (now - at <= keep) break;
      this.localTurns.delete(id);
    }
  }

  private async look(): Promise<void> {
    if (!this.pages.size || this.closed) return;
    const overlap = this.options.overlapMs ?? 10_000;
    try {
      // The first look-up after nobody listened hands nothing out: what was done before the page opened is in the
      // transcript the page loads. It notes the rows of the overlap, so that the next look-ups skip them too.
      const first = this.since === undefined;
      const from = first ? undefined : this.since! - overlap;
      const { rows } = await this.options.pool.query<{ now: Date; rows: DoneRow[]; published: PublishedRow[] }>(DONE_FOR_WEBCHAT,
        [from === undefined ? null : new Date(from), overlap, this.options.replicaId]);
      const found = rows[0];
      if (!found || !this.pages.size) return;
      for (const row of found.rows) {
        if (first) this.seen.set(`${row.session_key}\u0000${row.seq}`, Date.parse(row.done_at));
        else this.handOut(row);
      }
      for (const row of found.published) {
        if (first) this.seen.set(`\u0000${row.id}`, Date.parse(row.at));
        else this.handOutPublished(row);
      }
      this.since = found.now.getTime();
      if (from !== undefined) for (const [id, at] of this.seen) if (at < from - overlap) this.seen.delete(id);
    } catch (error) {
      this.options.logger.warn({ err: error }, 'could not look up web chat replies finished on other replicas; trying again');
    }
  }

  private handOut(row: DoneRow): void {
    const id = `${row.session_key}\u0000${row.seq}`;
    const at = Date.parse(row.done_at);
    if (this.seen.has(id)) return;
    this.seen.set(id, at);
    if (this.localTurns.has(row.correlation_id)) return;
    const user = row.internal?.deliverTo?.chatId;
    const pages = user === undefined ? undefined : this.pages.get(user);
    if (!pages?.size) return;
    for (const push of pushesOf(row, at)) for (const page of [...pages]) page.reply(push);
  }

  /** A reply another replica published: to this user's pages here, once. */
  private handOutPublished(row: PublishedRow): void {
    const id = `\u0000${row.id}`;
    if (this.seen.has(id)) return;
    const at = Date.parse(row.at);
    this.seen.set(id, at);
    for (const page of [...(this.pages.get(row.user_id) ?? [])]) page.reply({ ...row.push, at });
  }
}

/** The replies a finished internal message handed to the web chat (a heartbeat with nothing to say says nothing). */
function pushesOf(row: DoneRow, at: number): RelayedReply[] {
  const replies = row.result?.replies ?? [];
  const quiet = row.internal?.kind === 'heartbeat';
  return replies.filter((r) => !(quiet && isQuietHeartbeat(r.text))).map((r) => {
    const files = (r.files ?? []).filter((f) => f.sha256).map((f) => ({ name: f.name, mime: f.mime, size: f.size, sha256: f.sha256! }));
    return { text: outboundText(r), ...(files.length ? { files } : {}), kind: r.kind ?? 'reply', at };
  });
}
