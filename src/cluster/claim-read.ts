import type { Logger } from '../core/logger.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import { currentFence, type Fence } from './fence.ts';
import type { PgTranscriptStore, ReadRow } from './pg-transcript-store.ts';

/**
 * A session's entry (the `keyv` row) and its transcript in one statement: the rows after `$3` when the transcript
 * is the one this replica caches ($2), else all of it, with the row count of the same snapshot. The count is a CTE,
 * so it runs once, not per row.
 */
const READ_CLAIMED = `
WITH s AS (
  SELECT value, (value::jsonb -> 'value' ->> 'sessionId') AS sid FROM keyv WHERE key = $1
), c AS (
  SELECT count(*) AS total FROM sb_transcript_entry, s WHERE session_id = s.sid
)
SELECT s.value, s.sid, t.archived_at IS NOT NULL AS archived, t.session_id IS NOT NULL AS known, c.total, e.n, e.entry
FROM s CROSS JOIN c LEFT JOIN sb_transcript t ON t.session_id = s.sid
LEFT JOIN sb_transcript_entry e ON e.session_id = t.session_id AND e.n > (CASE WHEN s.sid = $2 THEN $3::bigint ELSE 0 END)
ORDER BY e.n`;

/** What {@link readOnClaim} primes. */
export interface ClaimReadTargets {
  sessions: {
    prime(key: string, entry: SessionEntry | undefined, stillHeld?: () => boolean): void;
    forget(key: string): void;
  };
  /** The entries' store: the row's key and how its text is read. */
  store: { storedKeyOf(key: string): string; decodeStored(raw: string): Promise<SessionEntry | undefined> };
  transcripts: PgTranscriptStore;
  logger: Logger;
}

/**
 * What a replica does when it takes a session's lock afresh (another replica may have advanced the session
 * meanwhile): it reads the session's entry and what its transcript gained, in one statement through the lock's
 * connection, and primes both caches with them, so the turn reads neither again (two statements per turn became
 * one). When that read fails, both caches are dropped and the turn reads them itself.
 */
export function readOnClaim(targets: ClaimReadTargets): (key: string, fence: Fence) => Promise<void> {
  const { sessions, store, transcripts, logger } = targets;
  return async (key, fence) => {
    const tail = transcripts.tailOf(key);
    try {
      const { rows } = await fence.client.query<ReadRow & { value: string; sid: string | null; known: boolean }>(READ_CLAIMED, [
        store.storedKeyOf(key), tail?.sessionId ?? '', tail?.lastN ?? 0,
      ]);
      const head = rows[0];
      const entry = head ? await store.decodeStored(head.value) : undefined;
      // No entry yet (a new session): its turn, under this same hold, creates it without reading again.
      sessions.prime(key, entry, () => currentFence() === fence && fence.alive && fence.key === key);
      if (!head?.sid || entry?.sessionId !== head.sid) {
        transcripts.forgetKey(key);
        return;
      }
      const after = head.sid === tail?.sessionId ? tail.lastN : 0;
      transcripts.primeFromClaim(key, head.sid, after, head.known ? rows : [], fence);
    } catch (error) {
      logger.debug({ err: error, sessionKey: key }, 'could not read a claimed session at once; its turn reads it');
      sessions.forget(key);
      transcripts.forgetKey(key);
    }
  };
}
