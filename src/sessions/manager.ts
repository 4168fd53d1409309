import { randomUUID } from 'node:crypto';
import pRetry from 'p-retry';
import type { Clock } from '../core/clock.ts';
import type { Logger } from '../core/logger.ts';
import type { ChannelId, ChatType } from '../core/message.ts';
import { emptyTokens, type SessionEntry } from './entry.ts';
import type { SessionStore } from './store.ts';
import type { TranscriptStore } from './transcript.ts';

/** The write failed because this replica no longer holds the session's lock (cluster mode's LeaseLostError). */
const lockLost = (error: unknown): boolean => (error as { code?: unknown } | undefined)?.code === 'LEASE_LOST';

/** What a new session entry is made from. */
export interface SessionInit {
  key: string;
  agentId: string;
  channel: ChannelId;
  accountId: string;
  chatType: ChatType;
  peerId?: string;
  groupId?: string;
  threadId?: string;
  parentKey?: string;
  displayName?: string;
  containerIds?: string[];
}

/** A session in the active cache. `entry` is the live record; the manager persists it. */
export interface ActiveSession {
  readonly key: string;
  entry: SessionEntry;
  /** Turns holding it; a held session is never evicted. */
  holds: number;
}

/** Options of {@link SessionManager}. */
export interface SessionManagerOptions {
  store: SessionStore;
  transcripts: TranscriptStore & { forget?(sessionId: string): void };
  clock: Clock;
  logger: Logger;
  maxActiveSessions: number;
  /** When an idle session expires under its reset policy (used to evict expired sessions first). */
  expiresAt: (entry: SessionEntry) => number;
  /** Retry schedule of entry writes. */
  retry?: { retries: number; minTimeout: number; maxTimeout: number };
  onEvict?: (entry: SessionEntry) => void;
  /**
   * Cluster mode: other replicas advance sessions too, so {@link SessionManager.get} reads an entry that is not
   * held here (and has no write of this process pending) from the store, not from the cache.
   */
  readThrough?: boolean;
}

/** A saved entry frozen until it is written: the store's serialized text, or a deep copy. */
type Snapshot = SessionEntry | string;

/** How far from the least-recently-active end eviction looks for an expired session. */
const EXPIRY_SCAN = 32;

/**
 * The active-session cache (SPEC §3): admission (cache → store → create), a hard bound on the number of
 * sessions in memory, expired-then-least-recently-active eviction (memory only), and entry persistence
 * with retry. Loads of different keys run in parallel; loads of one key are shared.
 */
export class SessionManager {
  private readonly active = new Map<string, ActiveSession>();
  private readonly loading = new Map<string, Promise<SessionEntry>>();
  /** Cluster mode: keys a claim found no entry for, with whether the same hold of their lock goes on ({@link prime}). */
  private readonly absent = new Map<string, () => boolean>();
  private readonly writes = new Map<string, Promise<void>>();
  /** Per key, the write waiting for the one under way (it writes the newest snapshot when it starts). */
  private readonly queuedWrites = new Map<string, { snapshot: Snapshot; entry: SessionEntry; write: Promise<void> }>();
  /** Entries whose last write failed after every retry; written again by {@link flush}. */
  private readonly unsaved = new Map<string, SessionEntry>();
  private readonly slotWaiters: (() => void)[] = [];
  private readonly options: SessionManagerOptions;
  private evictions = 0;

  constructor(options: SessionManagerOptions) {
    this.options = options;
  }

  get size(): number {
    return this.active.size;
  }

  get evictionCount(): number {
    return this.evictions;
  }

  /** The cached session of a key, if active. */
  peek(key: string): ActiveSession | undefined {
    return this.active.get(key);
  }

  activeSessions(): IterableIterator<ActiveSession> {
    return this.active.values();
  }

  /**
   * Admits a session and holds it (it cannot be evicted until {@link release}). Loads it from the store
   * or creates it on a miss.
   */
  async acquire(init: SessionInit): Promise<ActiveSession> {
    for (;;) {
      const cached = this.active.get(init.key);
      if (cached) {
        this.touch(cached);
        cached.holds++;
        return cached;
      }
      const entry = await this.load(init);
      const raced = this.active.get(init.key);
      if (raced) continue;
      if (this.active.size >= this.options.maxActiveSessions && !this.evictOne()) {
        await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
        continue;
      }
      const session: ActiveSession = { key: init.key, entry, holds: 1 };
      this.active.set(init.key, session);
      return session;
    }
  }

  /** Ends a hold taken by {@link acquire}. */
  release(session: ActiveSession): void {
    session.holds = Math.max(0, session.holds - 1);
    if (session.holds === 0) this.slotWaiters.shift()?.();
  }

  /** Admits without holding (read access, tests). */
  async admit(init: SessionInit): Promise<ActiveSession> {
    const session = await this.acquire(init);
    this.release(session);
    return session;
  }

  /** Reads an entry: the live one if active (in read-through mode only while held or being written), else the stored one. */
  async get(key: string): Promise<SessionEntry | undefined> {
    const cached = this.active.get(key);
    if (cached && (!this.options.readThrough || cached.holds > 0 || this.writes.has(key))) return cached.entry;
    return (await this.options.store.get(key)) ?? cached?.entry;
  }

  /** Persists an entry; retries with backoff; writes of one key stay in order. */
  save(entry: SessionEntry): Promise<void> {
    // A write of this key that has not started yet takes the newer snapshot instead of queueing another:
    // a burst of saves (a checkpoint per tool result) costs one write per write already under way.
    const queued = this.queuedWrites.get(entry.key);
    if (queued) {
      queued.snapshot = this.snapshot(entry);
      queued.entry = entry;
      return queued.write;
    }
    const next = { snapshot: this.snapshot(entry), entry, write: undefined as unknown as Promise<void> };
    this.queuedWrites.set(entry.key, next);
    const previous = this.writes.get(entry.key) ?? Promise.resolve();
    const retry = this.options.retry ?? { retries: 5, minTimeout: 50, maxTimeout: 2000 };
    const write = previous.then(() => {
      if (this.queuedWrites.get(entry.key) === next) this.queuedWrites.delete(entry.key);
      // The first attempt outside p-retry: nearly every write succeeds at once, and the retry machinery
      // (options, closures, promise hops) costs more than the write itself on the hot path.
      return this.write(entry.key, next.snapshot).catch((firstError: unknown) => {
        let replay: Error | undefined = firstError instanceof Error ? firstError : new Error(String(firstError));
        return pRetry(() => {
          if (replay === undefined) return this.write(entry.key, next.snapshot);
          const error = replay;
          replay = undefined;
          throw error; // p-retry counts the failed first attempt as its first, with the same backoff after it.
        }, {
          ...retry,
          // Cluster mode: a replica that lost the session's lock may not write it again, now or at shutdown.
          shouldRetry: ({ error }) => !lockLost(error),
          onFailedAttempt: ({ error, attemptNumber, retriesLeft }) => {
            this.options.logger.warn({ err: error, key: entry.key, attemptNumber, retriesLeft }, 'session store write failed; retrying');
          },
        });
      });
    });
    next.write = write;
    const settled: Promise<void> = write.then(
      () => { this.unsaved.delete(entry.key); },
      (error: unknown) => { if (!lockLost(error)) this.unsaved.set(entry.key, next.entry); },
    ).finally(() => {
      if (this.writes.get(entry.key) === settled) this.writes.delete(entry.key);
    });
    this.writes.set(entry.key, settled);
    return write;
  }

  /** The entry as it is now: serialized by the store when it can (once per write), else a deep copy. */
  private snapshot(entry: SessionEntry): Snapshot {
    const store = this.options.store;
    return store.serialize && store.setSerialized ? store.serialize(entry) : structuredClone(entry);
  }

  private write(key: string, snapshot: Snapshot): Promise<void> {
    return typeof snapshot === 'string' ? this.options.store.setSerialized!(key, snapshot) : this.options.store.set(snapshot);
  }

  /** Waits for every pending entry write. */
  async flush(): Promise<void> {
    while (this.writes.size) await Promise.allSettled([...this.writes.values()]);
    const retry = [...this.unsaved.values()];
    this.unsaved.clear();
    await Promise.allSettled(retry.map((entry) => this.save(entry)));
    while (this.writes.size) await Promise.allSettled([...this.writes.values()]);
  }

  /** Keys whose latest state is not on disk (their writes failed after every retry). */
  get unsavedCount(): number {
    return this.unsaved.size;
  }

  /**
   * Starts a new session id for the key: archives the old transcript and persists the entry.
   * Token totals stay (they are the key's history); context figures start over.
   */
  async reset(session: ActiveSession, reason: NonNullable<SessionEntry['lastResetReason']>): Promise<SessionEntry> {
    const now = this.options.clock.now();
    const old = session.entry;
    if (old.messageCount > 0) await this.options.transcripts.archive(old.sessionId, new Date(now));
    else this.options.transcripts.forget?.(old.sessionId);
    session.entry = {
      ...old,
      sessionId: randomUUID(),
      sessionStartedAt: now,
      updatedAt: now,
      state: 'active',
      runState: 'idle',
      contextTokens: 0,
      compactionCount: 0,
      messageCount: 0,
      lastResetReason: reason,
      lastRequestAt: undefined,
      sessionTokens: undefined,
      checkpoint: undefined,
    };
    await this.save(session.entry);
    return session.entry;
  }

  /**
   * Drops a key's cached session unless a turn holds it (cluster mode: another replica may have advanced
   * it since, so the next turn reads the store). Nothing persisted is touched.
   */
  forget(key: string): void {
    this.absent.delete(key);
    const session = this.active.get(key);
    if (!session || session.holds > 0) return;
    this.active.delete(key);
    this.options.transcripts.forget?.(session.entry.sessionId);
  }

  /**
   * Cluster mode: `entry` was read just now under the session's lock, so the next {@link acquire} uses it without
   * reading the store. Undefined: none is stored, and while `stillHeld` says the same hold of the lock goes on, the
   * next acquire creates the entry without looking again. A held session is left as it is.
   */
  prime(key: string, entry: SessionEntry | undefined, stillHeld?: () => boolean): void {
    if ((this.active.get(key)?.holds ?? 0) > 0) return;
    this.forget(key);
    if (!entry) {
      if (stillHeld && !this.loading.has(key) && !this.writes.has(key)) this.absent.set(key, stillHeld);
      return;
    }
    if (this.loading.has(key) || this.writes.has(key) || this.active.size >= this.options.maxActiveSessions) return;
    this.active.set(key, { key, entry, holds: 0 });
  }

  /** Drops every unheld session from memory (nothing persisted is touched). */
  evictAll(): void {
    for (const session of [...this.active.values()]) if (session.holds === 0) this.evict(session);
  }

  private async load(init: SessionInit): Promise<SessionEntry> {
    let pending = this.loading.get(init.key);
    if (!pending) {
      pending = this.loadOrCreate(init).finally(() => this.loading.delete(init.key));
      this.loading.set(init.key, pending);
    }
    return pending;
  }

  private async loadOrCreate(init: SessionInit): Promise<SessionEntry> {
    const absent = this.absent.get(init.key);
    this.absent.delete(init.key);
    const stored = absent?.() ? undefined : await this.options.store.get(init.key);
    if (stored) return stored;
    const now = this.options.clock.now();
    return {
      ...init,
      sessionId: randomUUID(),
      createdAt: now,
      updatedAt: now,
      sessionStartedAt: now,
      state: 'active',
      runState: 'idle',
      overrides: {},
      tokens: emptyTokens(),
      contextTokens: 0,
      compactionCount: 0,
      messageCount: 0,
    };
  }

  private touch(session: ActiveSession): void {
    this.active.delete(session.key);
    this.active.set(session.key, session);
  }

  /** Evicts one unheld session: an expired one near the idle end first, else the least recently active. */
  private evictOne(): boolean {
    const now = this.options.clock.now();
    let oldest: ActiveSession | undefined;
    let scanned = 0;
    for (const session of this.active.values()) {
      if (session.holds > 0) continue;
      oldest ??= session;
      if (this.options.expiresAt(session.entry) <= now) {
        this.evict(session);
        return true;
      }
      if (++scanned >= EXPIRY_SCAN) break;
    }
    if (!oldest) return false;
    this.evict(oldest);
    return true;
  }

  private evict(session: ActiveSession): void {
    this.active.delete(session.key);
    this.evictions++;
    this.options.transcripts.forget?.(session.entry.sessionId);
    this.options.onEvict?.(session.entry);
  }
}
