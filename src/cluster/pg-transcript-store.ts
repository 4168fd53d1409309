import type pg from 'pg';
import { SwitchboardError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import { archiveStamp, type TranscriptEntry, type TranscriptHeader, type TranscriptStore } from '../sessions/transcript.ts';
import type { ClusterListener } from './cluster-listener.ts';
import { currentFence, type Fence } from './fence.ts';
import { jsonbText } from './jsonb.ts';
import { querySession, type Queryable } from './session-query.ts';

/** A transcript was appended to, or archived, before it was created (no `sb_transcript` row names it). */
export class TranscriptNotFoundError extends SwitchboardError {
  constructor(sessionId: string) {
    super('TRANSCRIPT_NOT_FOUND', `No transcript ${sessionId} in the cluster database: it must be created (with its session key) before entries are appended.`);
  }
}

/** Session ids whose key is remembered (older ones are looked up again: one query). */
const MAX_KNOWN = 100_000;

/** An entry as jsonb text: NUL characters and unpaired surrogates, which jsonb refuses, become U+FFFD. */
export function entryJson(entry: unknown): string {
  return jsonbText(entry);
}

/**
 * Multi-row `INSERT` of entries of one transcript, in order (`n` is taken row by row, so the batch stays
 * contiguous and in order for one writer). Exported for `switchboard migrate`.
 */
export async function insertEntries(db: Queryable, sessionId: string, entries: readonly unknown[]): Promise<void> {
  for (let start = 0; start < entries.length; start += 500) {
    const chunk = entries.slice(start, start + 500);
    const values = chunk.map((_, i) => `($1, $${i + 2}::jsonb)`).join(', ');
    await db.query(`INSERT INTO sb_transcript_entry (session_id, entry) VALUES ${values}`, [sessionId, ...chunk.map(entryJson)]);
  }
}

/** The entries a transcript read returns (the others stay in the database, for the export). */
const isContext = (e: TranscriptEntry): boolean => e.type === 'message' || e.type === 'compaction';

/** What is cached of one transcript. */
interface Cached {
  key: string;
  /** The entries {@link PgTranscriptStore.read} returns (messages and compactions), in order. */
  entries: TranscriptEntry[];
  /** Rows of the transcript in the database when it was last seen complete (all types). */
  rows: number;
  /** The greatest `n` among them (0: none). */
  lastN: number;
  /**
   * The lock tenure the entries are known complete in: the fence of this replica's hold of the session's lock
   * under which they were last checked. While that hold lasts nobody else appends, so reads under it use the
   * cache as it is; every other read first checks the database (one statement).
   */
  trustedBy: Fence | undefined;
}

/** Whether a lane connection still holds `key`'s lock. */
function stillHolds(fence: Fence, key: string): boolean {
  return fence.alive && fence.key === key;
}

/** Rows of a check or a full read: the transcript's state and the entries after `n` ($2). */
export interface ReadRow { archived: boolean; total: string | null; n: string | null; entry: TranscriptEntry | null }

/**
 * The current transcript's entries after `$2` (all with 0) and whether it is archived; with the row count
 * (`total`) of the same snapshot when checking a cache, which tells a gap (an entry committed out of `n` order,
 * or a rolled-back append) from a mere tail. No row: the transcript is unknown.
 */
const READ_AFTER = (counted: boolean) => `
SELECT t.archived_at IS NOT NULL AS archived, ${counted ? '(SELECT count(*) FROM sb_transcript_entry c WHERE c.session_id = $1)' : 'NULL'} AS total, e.n, e.entry
FROM sb_transcript t LEFT JOIN sb_transcript_entry e ON e.session_id = t.session_id AND e.n > $2
WHERE t.session_id = $1 ORDER BY e.n`;

/** Options of {@link PgTranscriptStore}. */
export interface PgTranscriptStoreOptions {
  /** The shared pool of the cluster database. */
  pool: pg.Pool;
  logger: Logger;
  /** Transcripts kept in memory (default 256, as the JSONL store). */
  cacheLimit?: number;
}

/**
 * Transcripts in the cluster database (SPEC §4 and §13): one `sb_transcript` row per session id (its key,
 * agent, creation and archive time) and one `sb_transcript_entry` row per entry, in order (`n`). The drop-in of
 * `AgentTranscriptStores` in cluster mode. Every statement about a transcript runs through its session's lane
 * connection while the running code holds that session's lock (`fencedClient`), so an append after the lock
 * was lost fails with `LeaseLostError`, and an append inside the lane's transaction commits with it; otherwise
 * through the pool. Operations on one session id run one after another, in call order.
 *
 * A read cache of recent transcripts is kept, and no read returns less than was committed before it began
 * (issue 31): a read under the session's lock uses the cache as it is when it was checked in this hold of the
 * lock (nobody else appends meanwhile: no statement); any other read (history routes, the dashboard, another
 * session's `sessions` tool, a first read after the lock was taken) asks the database for what was appended
 * since (one statement; a full read only when the cache has a gap). A new hold of the lock is told by
 * {@link forget} / {@link forgetKey} (call one when this replica takes a session's lock afresh) and, as a
 * hint, by another replica's `sb_done` ({@link watchTranscriptChanges}); an append that finds rows the cache
 * lacks drops the cache too.
 */
export class PgTranscriptStore implements TranscriptStore {
  private readonly pool: pg.Pool;
  private readonly logger: Logger;
  private readonly cacheLimit: number;
  private readonly cache = new Map<string, Cached>();
  private readonly keys = new Map<string, string>();
  private readonly queues = new Map<string, Promise<void>>();

  constructor(options: PgTranscriptStoreOptions) {
    this.pool = options.pool;
    this.logger = options.logger;
    this.cacheLimit = options.cacheLimit ?? 256;
  }

  /** Where a transcript is, for messages (no file: `postgres:sb_transcript/<sessionId>`). */
  pathOf(sessionId: string): string {
    if (!/^[A-Za-z0-9_-]+$/.test(sessionId)) throw new Error(`Invalid session id "${sessionId}".`);
    return `postgres:sb_transcript/${sessionId}`;
  }

  /** Creates the transcript (its key and agent) unless it exists. */
  create(sessionId: string, key: string, at: Date): Promise<void> {
    this.pathOf(sessionId);
    const agentId = parseSessionKey(key).agentId;
    return this.serial(sessionId, async () => {
      const { rowCount } = await querySession(this.pool, key,
        'INSERT INTO sb_transcript (session_id, session_key, agent_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (session_id) DO NOTHING',
        [sessionId, key, agentId, at]);
      this.rememberKey(sessionId, key);
      if (rowCount) this.remember(sessionId, { key, entries: [], rows: 0, lastN: 0, trustedBy: this.holdOf(key) });
    });
  }

  /**
   * Appends entries after the transcript's last one (in one statement: all or none). The same statement says
   * where the transcript ended before: when that is not where the cache ends, the cache is dropped.
   */
  append(sessionId: string, entries: TranscriptEntry | TranscriptEntry[]): Promise<void> {
    const list = Array.isArray(entries) ? entries : [entries];
    if (list.length === 0) return Promise.resolve();
    return this.serial(sessionId, async () => {
      const key = await this.keyOf(sessionId);
      const values = list.map((_, i) => `($1, $${i + 2}::jsonb)`).join(', ');
      const texts = list.map(entryJson);
      const { rows } = await querySession<{ n: string; before: string }>(this.pool, key,
        `WITH i AS (INSERT INTO sb_transcript_entry (session_id, entry) VALUES ${values} RETURNING n)
         SELECT n, (SELECT coalesce(max(n), 0) FROM sb_transcript_entry WHERE session_id = $1) AS before FROM i ORDER BY n`,
        [sessionId, ...texts]);
      const cached = this.cache.get(sessionId);
      if (!cached) return;
      if (Number(rows[0]?.before) !== cached.lastN) {
        this.logger.debug({ sessionId, sessionKey: key }, 'transcript cache behind the database at an append; dropped');
        this.cache.delete(sessionId);
        return;
      }
      // What the database stores (and another replica reads), not the caller's objects.
      cached.entries.push(...texts.map((t) => JSON.parse(t) as TranscriptEntry).filter(isContext));
      cached.rows += rows.length;
      cached.lastN = Number(rows[rows.length - 1]?.n ?? cached.lastN);
      this.remember(sessionId, cached);
    });
  }

  /** Every entry of the current (not archived) transcript, in order; none for an unknown or archived one. */
  read(sessionId: string): Promise<TranscriptEntry[]> {
    return this.serial(sessionId, async () => {
      const cached = this.cache.get(sessionId);
      if (cached) {
        const hold = this.holdOf(cached.key);
        if (hold && cached.trustedBy === hold) {
          this.remember(sessionId, cached);
          return cached.entries.slice();
        }
        const checked = await this.check(sessionId, cached, hold);
        if (checked) return checked.slice();
      }
      const key = await this.keyOf(sessionId).catch((error: unknown) => {
        if (error instanceof TranscriptNotFoundError) return undefined;
        throw error;
      });
      if (key === undefined) return [];
      const { rows } = await querySession<ReadRow>(this.pool, key, READ_AFTER(false), [sessionId, 0]);
      if (!rows[0] || rows[0].archived) return [];
      const found = rows.filter((r) => r.n !== null);
      const entries = found.map((r) => r.entry!).filter(isContext);
      this.remember(sessionId, { key, entries, rows: found.length, lastN: Number(found[found.length - 1]?.n ?? 0), trustedBy: this.holdOf(key) });
      return entries.slice();
    });
  }

  /**
   * Brings a cached transcript up to date with one statement (what was appended after its last entry, and the
   * row count). Returns its entries, `[]` when it is archived or gone, undefined when the cache had a gap (the
   * caller reads it whole).
   */
  private async check(sessionId: string, cached: Cached, hold: Fence | undefined): Promise<TranscriptEntry[] | undefined> {
    const { rows } = await querySession<ReadRow>(this.pool, cached.key, READ_AFTER(true), [sessionId, cached.lastN]);
    const head = rows[0];
    if (!head || head.archived) {
      this.cache.delete(sessionId);
      return [];
    }
    const added = rows.filter((r) => r.n !== null);
    if (cached.rows + added.length !== Number(head.total)) {
      this.cache.delete(sessionId);
      return undefined;
    }
    cached.entries.push(...added.map((r) => r.entry!).filter(isContext));
    cached.rows += added.length;
    if (added.length) cached.lastN = Number(added[added.length - 1]!.n);
    // Checked under this hold of the lock: complete for as long as it lasts. Checked outside it: a change found
    // means someone else appended, so no earlier hold vouches for it any more.
    if (hold) cached.trustedBy = hold;
    else if (added.length) cached.trustedBy = undefined;
    this.remember(sessionId, cached);
    return cached.entries;
  }

  /**
   * Marks the transcript archived at `at` (a reset): it is read no more and deleted by {@link pruneArchives}
   * after the retention. Returns its archive name (`…/<sessionId>.jsonl.reset.<UTC>`), undefined when there
   * is no current transcript of that id.
   */
  archive(sessionId: string, at: Date): Promise<string | undefined> {
    return this.serial(sessionId, async () => {
      this.cache.delete(sessionId);
      const key = await this.keyOf(sessionId).catch(() => undefined);
      if (key === undefined) return undefined;
      const { rowCount } = await querySession(this.pool, key,
        'UPDATE sb_transcript SET archived_at = $2 WHERE session_id = $1 AND archived_at IS NULL', [sessionId, at]);
      return rowCount ? `${this.pathOf(sessionId)}.jsonl.reset.${archiveStamp(at)}` : undefined;
    });
  }

  /** Deletes transcripts archived more than `maxAgeMs` before `now` (with their entries). */
  async pruneArchives(now: Date, maxAgeMs: number): Promise<number> {
    const { rowCount } = await this.pool.query('DELETE FROM sb_transcript WHERE archived_at < $1', [new Date(now.getTime() - maxAgeMs)]);
    return rowCount ?? 0;
  }

  /** Files a transcript under another key and agent (re-keying, SPEC §12). False when there is none. */
  async move(sessionId: string, to: { key: string; agentId?: string }): Promise<boolean> {
    const agentId = to.agentId ?? parseSessionKey(to.key).agentId;
    return this.serial(sessionId, async () => {
      const { rowCount } = await this.pool.query('UPDATE sb_transcript SET session_key = $2, agent_id = $3 WHERE session_id = $1', [sessionId, to.key, agentId]);
      this.cache.delete(sessionId);
      this.keys.delete(sessionId);
      return (rowCount ?? 0) > 0;
    });
  }

  /** The transcript in SPEC §4's JSON Lines (header, then entries), archived or not; undefined when unknown. */
  async exportJsonl(sessionId: string): Promise<string | undefined> {
    const head = await this.pool.query<{ session_key: string; created_at: Date }>('SELECT session_key, created_at FROM sb_transcript WHERE session_id = $1', [sessionId]);
    const row = head.rows[0];
    if (!row) return undefined;
    const header: TranscriptHeader = { type: 'session', version: 1, sessionId, key: row.session_key, createdAt: row.created_at.toISOString() };
    const { rows } = await this.pool.query<{ entry: TranscriptEntry }>('SELECT entry FROM sb_transcript_entry WHERE session_id = $1 ORDER BY n', [sessionId]);
    return [header, ...rows.map((r) => r.entry)].map((line) => `${JSON.stringify(line)}\n`).join('');
  }

  /**
   * Another replica may have advanced the session: its next read checks the database (for what was appended
   * since the cache's last entry: one statement, not a full read).
   */
  forget(sessionId: string): void {
    const cached = this.cache.get(sessionId);
    if (cached) cached.trustedBy = undefined;
  }

  /**
   * {@link forget} for every cached transcript of a session key (each session id it had). Call it when this
   * replica takes the key's lock afresh (`onClaim`): another replica may have run the session meanwhile.
   */
  forgetKey(key: string): void {
    for (const cached of this.cache.values()) if (cached.key === key) cached.trustedBy = undefined;
  }

  /** The newest transcript cached of `key` and its last `n`: where a read made at a claim can start. */
  tailOf(key: string): { sessionId: string; lastN: number } | undefined {
    let tail: { sessionId: string; lastN: number } | undefined;
    for (const [sessionId, cached] of this.cache) if (cached.key === key) tail = { sessionId, lastN: cached.lastN };
    return tail;
  }

  /**
   * `key`'s lock was just taken (`hold`), and the same statement read transcript `sessionId`: its rows after
   * `after` (0: all of it) and the row count, as {@link READ_AFTER}(true) returns them (none: no such transcript).
   * The cache takes them as a check made under that hold, so the turn's first read costs no statement; the
   * key's other transcripts are checked again when read.
   */
  primeFromClaim(key: string, sessionId: string, after: number, rows: readonly ReadRow[], hold: Fence): void {
    this.forgetKey(key);
    const head = rows[0];
    if (!head || head.archived) {
      this.cache.delete(sessionId);
      return;
    }
    const added = rows.filter((r) => r.n !== null);
    const cached: Cached | undefined = after > 0 ? this.cache.get(sessionId) : { key, entries: [], rows: 0, lastN: 0, trustedBy: undefined };
    if (!cached || cached.key !== key || cached.lastN !== after || cached.rows + added.length !== Number(head.total)) {
      this.cache.delete(sessionId);
      return;
    }
    cached.entries.push(...added.map((r) => r.entry!).filter(isContext));
    cached.rows += added.length;
    if (added.length) cached.lastN = Number(added[added.length - 1]!.n);
    cached.trustedBy = hold;
    this.rememberKey(sessionId, key);
    this.remember(sessionId, cached);
  }

  /**
   * A turn of `key` finished somewhere (`sb_done`): unless this replica still has the key's lock on the
   * connection that vouched for the cache (the turn was its own, or the notice is older than the hold, which was
   * checked when it began), its reads check again.
   */
  finished(key: string): void {
    for (const cached of this.cache.values()) {
      if (cached.key !== key) continue;
      const hold = cached.trustedBy;
      if (!hold || !stillHolds(hold, key)) cached.trustedBy = undefined;
    }
  }

  /** Nothing to close: the pool belongs to the caller. Waits for operations under way. */
  async close(): Promise<void> {
    await Promise.all([...this.queues.values()]);
  }

  /** The fence of the running code when it holds `key`'s lock (alive), else undefined. */
  private holdOf(key: string): Fence | undefined {
    const fence = currentFence();
    return fence && fence.key === key && fence.alive ? fence : undefined;
  }

  /** Runs `op` after every earlier operation on the same session id (whatever their outcome). */
  private serial<T>(sessionId: string, op: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(sessionId) ?? Promise.resolve();
    const run = previous.then(op);
    const tail = run.then(() => undefined, () => undefined);
    this.queues.set(sessionId, tail);
    void tail.then(() => { if (this.queues.get(sessionId) === tail) this.queues.delete(sessionId); });
    return run;
  }

  /** The session key of a transcript: remembered from create(), else looked up. */
  private async keyOf(sessionId: string): Promise<string> {
    const known = this.keys.get(sessionId);
    if (known !== undefined) return known;
    const { rows } = await this.pool.query<{ session_key: string }>('SELECT session_key FROM sb_transcript WHERE session_id = $1', [sessionId]);
    const key = rows[0]?.session_key;
    if (key === undefined) {
      this.logger.debug({ sessionId }, 'transcript not found in the cluster database');
      throw new TranscriptNotFoundError(sessionId);
    }
    this.rememberKey(sessionId, key);
    return key;
  }

  private rememberKey(sessionId: string, key: string): void {
    this.keys.delete(sessionId);
    this.keys.set(sessionId, key);
    if (this.keys.size > MAX_KNOWN) this.keys.delete(this.keys.keys().next().value as string);
  }

  private remember(sessionId: string, cached: Cached): void {
    this.cache.delete(sessionId);
    this.cache.set(sessionId, cached);
    while (this.cache.size > this.cacheLimit) this.cache.delete(this.cache.keys().next().value as string);
  }
}

/**
 * Wires a replica's transcript cache to the cluster's `sb_done` notifications (payload `{key, seq}`): a turn
 * another replica finished makes this replica's next read of that session check the database. A hint only
 * (notifications are not durable): reads outside the lock check anyway, and a new hold is told by
 * {@link PgTranscriptStore.forgetKey}.
 */
export function watchTranscriptChanges(store: PgTranscriptStore, listener: Pick<ClusterListener, 'on'>): void {
  listener.on('sb_done', (payload) => {
    let key: unknown;
    try {
      key = (JSON.parse(payload) as { key?: unknown }).key;
    } catch {
      return;
    }
    if (typeof key === 'string') store.finished(key);
  });
}
