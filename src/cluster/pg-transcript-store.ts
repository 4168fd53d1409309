import type pg from 'pg';
import { SwitchboardError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import { archiveStamp, type TranscriptEntry, type TranscriptHeader, type TranscriptStore } from '../sessions/transcript.ts';
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
 * through the pool. Operations on one session id run one after another, in call order. A read cache of recent
 * transcripts is kept; {@link forget} drops a session's (call it when another replica may have advanced it).
 */
export class PgTranscriptStore implements TranscriptStore {
  private readonly pool: pg.Pool;
  private readonly logger: Logger;
  private readonly cacheLimit: number;
  private readonly cache = new Map<string, TranscriptEntry[]>();
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
      if (rowCount) this.remember(sessionId, []);
    });
  }

  /** Appends entries after the transcript's last one (in one statement: all or none). */
  append(sessionId: string, entries: TranscriptEntry | TranscriptEntry[]): Promise<void> {
    const list = Array.isArray(entries) ? entries : [entries];
    if (list.length === 0) return Promise.resolve();
    return this.serial(sessionId, async () => {
      const key = await this.keyOf(sessionId);
      const values = list.map((_, i) => `($1, $${i + 2}::jsonb)`).join(', ');
      await querySession(this.pool, key, `INSERT INTO sb_transcript_entry (session_id, entry) VALUES ${values}`, [sessionId, ...list.map(entryJson)]);
      const cached = this.cache.get(sessionId);
      if (cached) {
        cached.push(...list.map((e) => structuredClone(e)));
        this.remember(sessionId, cached);
      }
    });
  }

  /** Every entry of the current (not archived) transcript, in order; none for an unknown or archived one. */
  read(sessionId: string): Promise<TranscriptEntry[]> {
    return this.serial(sessionId, async () => {
      const cached = this.cache.get(sessionId);
      if (cached) {
        this.remember(sessionId, cached);
        return cached.slice();
      }
      const key = await this.keyOf(sessionId).catch((error: unknown) => {
        if (error instanceof TranscriptNotFoundError) return undefined;
        throw error;
      });
      if (key === undefined) return [];
      const { rows } = await querySession<{ entry: TranscriptEntry }>(this.pool, key,
        `SELECT e.entry FROM sb_transcript_entry e JOIN sb_transcript t USING (session_id)
         WHERE e.session_id = $1 AND t.archived_at IS NULL ORDER BY e.n`, [sessionId]);
      const entries = rows.map((r) => r.entry).filter((e) => e.type === 'message' || e.type === 'compaction');
      this.remember(sessionId, entries);
      return entries.slice();
    });
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
      this.forgetNow(sessionId);
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

  /** Drops what is cached of a session (another replica may have advanced it). */
  forget(sessionId: string): void {
    this.forgetNow(sessionId);
  }

  /** Nothing to close: the pool belongs to the caller. Waits for operations under way. */
  async close(): Promise<void> {
    await Promise.all([...this.queues.values()]);
  }

  private forgetNow(sessionId: string): void {
    this.cache.delete(sessionId);
    this.keys.delete(sessionId);
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

  private remember(sessionId: string, entries: TranscriptEntry[]): void {
    this.cache.delete(sessionId);
    this.cache.set(sessionId, entries);
    while (this.cache.size > this.cacheLimit) this.cache.delete(this.cache.keys().next().value as string);
  }
}
