import type pg from 'pg';
import type { LlmCallEvent, TurnEvents, TurnScope } from '../agent/turn-events.ts';
import type { ProviderFailure } from '../accounting/provider-tracker.ts';
import type { Logger } from '../core/logger.ts';
import type { ClusterListener } from './cluster-listener.ts';

/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; a little is kept for the envelope. */
export const MAX_PAYLOAD_BYTES = 7900;

/** A replica's own LLM failures and retries since it started, per provider (what the ledger does not hold). */
export interface ProviderCounters {
  errors: number;
  retries: number;
  lastError?: ProviderFailure;
}

/** The messages of the `sb_events` channel; `r` is the sending replica (receivers skip their own). */
type BusMessage =
  /** Sessions whose dashboard view changed on `r` (a turn started or ended, an LLM call, a tool call, a batch). */
  | { t: 's'; r: string; s: [key: string, reason: string][] }
  /** `r` has dashboard pages open: publish session changes for the next {@link ClusterEventBusOptions.watchTtlMs}. */
  | { t: 'w'; r: string }
  /** `r`'s provider failures and retries since its start (absolute, so a missed one is mended by the next). */
  | { t: 'p'; r: string; p: Record<string, ProviderCounters> }
  /** `r` started listening (first time or after a gap): the others say again what it may have missed ('w', 'p'). */
  | { t: 'h'; r: string };

/** Options of {@link ClusterEventBus}. */
export interface ClusterEventBusOptions {
  pool: pg.Pool;
  listener: ClusterListener;
  replicaId: string;
  logger: Logger;
  /** This replica's turn events (what it publishes). */
  events: TurnEvents;
  /** This replica's failures and retries per provider since its start (`Accounting.providers`). */
  localProviders(): Record<string, ProviderCounters>;
  /** Changes are gathered this long and sent as one notification (default 250 ms). */
  flushMs?: number;
  /** How long a replica's dashboard interest lasts without being renewed (default 30 s; renewed every third of it). */
  watchTtlMs?: number;
  now?: () => number;
}

/**
 * The `sb_events` channel: what one replica's pages show about the work of the others (SPEC §13).
 * - Session changes for the dashboard's live stream, deduplicated by session key and sent at most once per
 *   `flushMs`, and only while some replica has a dashboard page open (it says so with a `w` message every
 *   `watchTtlMs / 3`): a cluster nobody watches sends no notification per turn.
 * - Each replica's provider failures and retries (absolute counts, sent after a change and when a replica
 *   asks with `h`), which `/status` adds to the shared ledger's requests and tokens.
 * Notifications are not durable: a missed session change only delays what the page shows until the next one
 * (the page reloads what it shows after its own reconnection, and `/status` is compared every second); counters
 * are absolute and resent on every change and on each `h`.
 */
export class ClusterEventBus {
  private readonly options: ClusterEventBusOptions;
  private readonly sessionHandlers: ((key: string, reason: string) => void)[] = [];
  private readonly remoteProviders = new Map<string, Record<string, ProviderCounters>>();
  private readonly pendingSessions = new Map<string, string>();
  private providersDirty = false;
  private flushTimer: NodeJS.Timeout | undefined;
  private watchTimer: NodeJS.Timeout | undefined;
  /** Until when some other replica watches (epoch ms of this process's clock). */
  private watchedUntil = 0;
  private watchers = 0;
  private closed = false;
  /** Closed and flushed: nothing more is sent (the pool may be ending). */
  private ended = false;
  private readonly unsubscribe: () => void;

  constructor(options: ClusterEventBusOptions) {
    this.options = options;
    const changed = (reason: string) => (event: TurnScope) => this.sessionChanged(event.sessionKey, reason);
    this.unsubscribe = options.events.subscribe({
      onTurnStart: changed('turn-start'),
      onLlmCall: (event) => { changed('llm-call')(event); this.llmCall(event); },
      onToolCall: changed('tool-call'),
      onBatchEnd: changed('batch-end'),
      onTurnEnd: changed('turn-end'),
    });
    options.listener.on('sb_events', (payload) => this.receive(payload));
    options.listener.onConnect(() => { void this.notify({ t: 'h', r: options.replicaId }); });
    if (options.listener.listening) void this.notify({ t: 'h', r: options.replicaId });
  }

  /** Calls `handler` with each session another replica changed (while this replica {@link watch}es). */
  onSessionChange(handler: (key: string, reason: string) => void): () => void {
    this.sessionHandlers.push(handler);
    return () => {
      const i = this.sessionHandlers.indexOf(handler);
      if (i >= 0) this.sessionHandlers.splice(i, 1);
    };
  }

  /** Says that a dashboard page is open here (`true`) or closed (`false`); the other replicas publish while any is. */
  watch(open: boolean): void {
    this.watchers = Math.max(0, this.watchers + (open ? 1 : -1));
    if (this.watchers > 0 && !this.watchTimer && !this.closed) {
      const renew = () => { void this.notify({ t: 'w', r: this.options.replicaId }); };
      renew();
      this.watchTimer = setInterval(renew, Math.max(100, Math.floor(this.watchTtl / 3)));
      this.watchTimer.unref();
    } else if (this.watchers === 0) {
      clearInterval(this.watchTimer);
      this.watchTimer = undefined;
    }
  }

  /** The other replicas' provider failures and retries, summed per provider (as they last reported them). */
  remoteProviderCounters(): Map<string, ProviderCounters> {
    const sums = new Map<string, ProviderCounters>();
    for (const counters of this.remoteProviders.values()) {
      for (const [id, c] of Object.entries(counters)) {
        const sum = sums.get(id) ?? { errors: 0, retries: 0 };
        sum.errors += c.errors;
        sum.retries += c.retries;
        if (c.lastError && (!sum.lastError || c.lastError.at > sum.lastError.at)) sum.lastError = c.lastError;
        sums.set(id, sum);
      }
    }
    return sums;
  }

  /** Sends what is gathered and stops. */
  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe();
    clearInterval(this.watchTimer);
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    await this.flush();
    this.ended = true;
  }

  private get watchTtl(): number {
    return this.options.watchTtlMs ?? 30_000;
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  private sessionChanged(key: string, reason: string): void {
    if (this.now() >= this.watchedUntil) return;
    this.pendingSessions.set(key, reason);
    this.flushSoon();
  }

  private llmCall(event: LlmCallEvent): void {
    if (!event.error && !event.retries) return;
    this.providersDirty = true;
    this.flushSoon();
  }

  private flushSoon(): void {
    if (this.flushTimer || this.closed) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      void this.flush();
    }, this.options.flushMs ?? 250);
    this.flushTimer.unref();
  }

  /** One notification per {@link MAX_PAYLOAD_BYTES} of session changes, then the provider counters if they changed. */
  private async flush(): Promise<void> {
    const entries = [...this.pendingSessions];
    this.pendingSessions.clear();
    const r = this.options.replicaId;
    let chunk: [string, string][] = [];
    let bytes = 0;
    const envelope = Buffer.byteLength(JSON.stringify({ t: 's', r, s: [] }));
    for (const entry of entries) {
      const size = Buffer.byteLength(JSON.stringify(entry)) + 1;
      if (envelope + size > MAX_PAYLOAD_BYTES) continue; // a key this long is no real session key
      if (envelope + bytes + size > MAX_PAYLOAD_BYTES) {
        await this.notify({ t: 's', r, s: chunk });
        chunk = [];
        bytes = 0;
      }
      chunk.push(entry);
      bytes += size;
    }
    if (chunk.length) await this.notify({ t: 's', r, s: chunk });
    if (this.providersDirty) {
      this.providersDirty = false;
      await this.notify({ t: 'p', r, p: this.options.localProviders() });
    }
  }

  private async notify(message: BusMessage): Promise<void> {
    if (this.ended) return;
    await this.options.pool.query('SELECT pg_notify($1, $2)', ['sb_events', JSON.stringify(message)])
      .catch((err: unknown) => this.options.logger.warn({ err, kind: message.t }, 'could not notify the other replicas (what they show catches up with the next change)'));
  }

  private receive(payload: string): void {
    let message: BusMessage;
    try {
      message = JSON.parse(payload) as BusMessage;
    } catch {
      return;
    }
    if (!message || message.r === this.options.replicaId) return;
    switch (message.t) {
      case 's':
        for (const [key, reason] of message.s ?? []) for (const h of this.sessionHandlers) h(key, reason);
        return;
      case 'w':
        this.watchedUntil = this.now() + this.watchTtl;
        return;
      case 'p':
        this.remoteProviders.set(message.r, message.p ?? {});
        return;
      case 'h': {
        // A replica (re)started listening: it hears again that pages watch here, and this replica's counters.
        if (this.watchers > 0) void this.notify({ t: 'w', r: this.options.replicaId });
        const mine = this.options.localProviders();
        if (Object.values(mine).some((c) => c.errors || c.retries)) void this.notify({ t: 'p', r: this.options.replicaId, p: mine });
        return;
      }
      default:
    }
  }
}
