import type pg from 'pg';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { Logger } from '../core/logger.ts';
import { planRekey, routingFingerprint, type RekeyMove } from '../gateway/rekey.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import { deserializeKeyv, serializeKeyv } from '../sessions/keyv-codec.ts';
import { orphanedSessions } from './cluster-resume.ts';

/** keyv's namespace of session entries (`sessions:<key>`), as the session store writes them. */
const NAMESPACE = 'sessions';

/** The transaction-level advisory lock replicas re-key under (not a session key's: those hash `agent:…`). */
const REKEY_LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('switchboard:rekey', 0))`;

/** What a cluster re-key did. */
export interface ClusterRekeyOutcome {
  /** `done`: the sessions are keyed by the current routing (moved now, or already); `deferred`: left for a later start. */
  status: 'done' | 'deferred';
  /** Moves and archives made now. */
  moved: number;
}

/** Options of {@link clusterRekeyIfRoutingChanged}. */
export interface ClusterRekeyOptions {
  logger: Logger;
  /** Test hook: called after each step (inside the transaction), so a test can stop half-way. */
  afterStep?: (step: string) => void;
}

/**
 * SPEC §12 in cluster mode: when `identityLinks` or `bindings` changed since the sessions were last keyed
 * (`sb_routing`), entries that would now get another key move there with their transcripts, as
 * {@link planRekey} plans it for one machine (merges archive the less recently active conversation, cycles go
 * through a temporary key). Everything (entries, `sb_transcript` keys, group context, archives, the new
 * fingerprint) is written in one transaction under a transaction-level advisory lock: replicas starting together
 * re-key once (the others wait, then find the fingerprint current), and a replica that dies half-way leaves
 * nothing done, so the next start does it all, nothing twice. A session with queued messages or held by a
 * running replica is not moved under it: the whole re-key is deferred to a later start (and logged).
 */
export async function clusterRekeyIfRoutingChanged(config: ResolvedConfig, pool: pg.Pool, options: ClusterRekeyOptions): Promise<ClusterRekeyOutcome> {
  const { logger } = options;
  const fingerprint = routingFingerprint(config);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(REKEY_LOCK);
    const { rows } = await client.query<{ fingerprint: string }>('SELECT fingerprint FROM sb_routing WHERE id = 1');
    // No row: a cluster from before re-keying, whose routing is unknown, so every entry is checked as after a change.
    if (rows[0]?.fingerprint === fingerprint) {
      await client.query('COMMIT');
      return { status: 'done', moved: 0 };
    }
    const entries = await readEntries(client);
    const moves = await planRekey(iterate(entries), config);
    const involved = [...new Set(moves.flatMap((m) => [m.from, m.to]))];
    const free = await orphanedSessions(client, involved);
    const busy = involved.filter((k) => !free.has(k));
    if (busy.length) {
      await client.query('ROLLBACK');
      logger.warn({ sessions: busy.slice(0, 10), count: busy.length }, 'identity links or bindings changed, but sessions to re-key have queued messages or run on a replica: re-keying is left to a later start');
      return { status: 'deferred', moved: 0 };
    }
    if (moves.length) logger.info({ moves: moves.length }, 'identity links or bindings changed: re-keying sessions (cluster)');
    const moved = await applyClusterRekey(moves, entries, client, options);
    await client.query('INSERT INTO sb_routing (id, fingerprint, at) VALUES (1, $1, now()) ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint, at = now()', [fingerprint]);
    await client.query('COMMIT');
    return { status: 'done', moved };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

async function* iterate(entries: Map<string, SessionEntry>): AsyncGenerator<SessionEntry> {
  yield* entries.values();
}

/** Every session entry, read in the transaction, by key. */
async function readEntries(client: pg.PoolClient): Promise<Map<string, SessionEntry>> {
  const { rows } = await client.query<{ value: string }>(
    `SELECT value FROM keyv WHERE key COLLATE "C" > $1 AND key COLLATE "C" < $2 ORDER BY key COLLATE "C"`, [`${NAMESPACE}:`, `${NAMESPACE};`],
  );
  const entries = new Map<string, SessionEntry>();
  for (const { value } of rows) {
    const entry = deserializeKeyv<{ value?: SessionEntry }>(value).value;
    if (entry?.key) entries.set(entry.key, entry);
  }
  return entries;
}

/** Writes and deletes of entries in the transaction; `entries` follows them, so later steps see earlier ones. */
class TxEntries {
  constructor(private readonly client: pg.PoolClient, readonly entries: Map<string, SessionEntry>) {}

  get(key: string): SessionEntry | undefined {
    return this.entries.get(key);
  }

  async set(entry: SessionEntry): Promise<void> {
    await this.client.query('INSERT INTO keyv (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      [`${NAMESPACE}:${entry.key}`, serializeKeyv({ value: entry })]);
    this.entries.set(entry.key, entry);
  }

  async delete(key: string): Promise<void> {
    await this.client.query('DELETE FROM keyv WHERE key = $1', [`${NAMESPACE}:${key}`]);
    this.entries.delete(key);
  }
}

/**
 * Carries a plan out in the transaction, step for step as `applyRekey` does on one machine: an archive keeps
 * the entry in `sb_rekey_archive` and archives its transcript; a move points the transcript at the new key
 * (keeping the old one in `former_keys`), writes the entry under the new key, points spawned children at it,
 * moves the key's kept group context, and deletes the old entry.
 */
async function applyClusterRekey(moves: readonly RekeyMove[], read: Map<string, SessionEntry>, client: pg.PoolClient, options: ClusterRekeyOptions): Promise<number> {
  const { logger, afterStep } = options;
  const store = new TxEntries(client, read);
  const children = new Map<string, string[]>();
  for (const e of read.values()) if (e.parentKey && e.key.includes(':subagent:')) children.set(e.parentKey, [...(children.get(e.parentKey) ?? []), e.key]);
  let done = 0;
  for (const move of moves) {
    const entry = store.get(move.from);
    if (!entry || entry.sessionId !== move.sessionId) continue;
    if (move.action === 'archive') {
      await client.query(`INSERT INTO sb_rekey_archive (session_id, session_key, merged_into, entry) VALUES ($1, $2, $3, $4::jsonb)
        ON CONFLICT (session_id) DO UPDATE SET session_key = excluded.session_key, merged_into = excluded.merged_into, entry = excluded.entry, at = now()`,
      [entry.sessionId, entry.key, move.to, JSON.stringify(entry)]);
      await client.query('UPDATE sb_transcript SET archived_at = now() WHERE session_id = $1 AND archived_at IS NULL', [entry.sessionId]);
      afterStep?.(`archive ${move.from}`);
      if (move.from !== move.to) await store.delete(move.from);
      afterStep?.(`archived ${move.from}`);
      logger.info({ from: move.from, mergedInto: move.to, sessionId: move.sessionId }, 'session merged into another by re-keying; archived');
      done++;
      continue;
    }
    // A temporary key (half of a cycle) is left again by a later move: the transcript is pointed at the final key then.
    if (!move.temporary) {
      await client.query(`UPDATE sb_transcript SET session_key = $2, agent_id = $3, former_keys = former_keys || session_key
        WHERE session_id = $1 AND session_key <> $2`, [entry.sessionId, move.to, move.toAgent]);
    }
    afterStep?.(`transcript ${move.from}`);
    if (store.get(move.to)?.sessionId !== entry.sessionId) {
      const parsed = parseSessionKey(move.to);
      await store.set({ ...entry, key: move.to, agentId: move.toAgent, ...(parsed.parentKey ? { parentKey: parsed.parentKey } : {}) });
    }
    afterStep?.(`entry ${move.to}`);
    for (const key of children.get(move.from) ?? []) {
      const child = store.get(key);
      if (child?.parentKey === move.from) await store.set({ ...child, parentKey: move.to });
    }
    children.set(move.to, [...(children.get(move.to) ?? []), ...(children.get(move.from) ?? [])]);
    await client.query('UPDATE sb_group_context SET session_key = $2 WHERE session_key = $1', [move.from, move.to]);
    afterStep?.(`children ${move.from}`);
    await store.delete(move.from);
    afterStep?.(`deleted ${move.from}`);
    logger.info({ from: move.from, to: move.to, sessionId: move.sessionId }, 'session re-keyed (identity links or bindings changed)');
    done++;
  }
  return done;
}

/** The keys a transcript had before re-keying moved it (cluster mode's `formerKeys`); none when it never moved. */
export async function clusterFormerKeys(pool: Pick<pg.Pool, 'query'>, sessionId: string): Promise<string[]> {
  const { rows } = await pool.query<{ former_keys: string[] | null }>('SELECT former_keys FROM sb_transcript WHERE session_id = $1', [sessionId]);
  return rows[0]?.former_keys ?? [];
}
