import type { ActiveSession } from '../sessions/manager.ts';
import type { TranscriptEntry, TranscriptStore } from '../sessions/transcript.ts';

/**
 * A session's history as a turn sees it: its transcript, or memory for a one-off (ephemeral) session, with the
 * entries appended `later` that wait for the next write (the user's message goes in with the answer: one
 * transcript write per turn, one statement in cluster mode).
 */
export class SessionHistory {
  private readonly ephemeral = new WeakMap<ActiveSession, TranscriptEntry[]>();
  private readonly unwritten = new WeakMap<ActiveSession, TranscriptEntry[]>();

  constructor(private readonly transcripts: TranscriptStore) {}

  /** Keeps `session`'s history in memory from now on, empty (a one-off session, or one reset while one-off). */
  startEphemeral(session: ActiveSession): void {
    this.ephemeral.set(session, []);
  }

  /** The session's history, the entries waiting for a write included; sets the entry's message count from it. */
  async read(session: ActiveSession): Promise<TranscriptEntry[]> {
    const ephemeral = this.ephemeral.get(session);
    if (ephemeral) return ephemeral.slice();
    const stored = await this.transcripts.read(session.entry.sessionId);
    const entries = [...stored, ...(this.unwritten.get(session) ?? [])];
    // A crash can leave the entry behind its transcript (the entry is saved after the append, and a replayed
    // message that was already answered appends nothing): the file wins.
    let inFile = 0;
    for (const e of entries) if (e.type === 'message') inFile++;
    session.entry.messageCount = inFile;
    return entries;
  }

  /**
   * Appends, with the entries waiting for a write first. With `later` the entries wait for the next append;
   * {@link flush} writes them at the turn's end at the latest.
   */
  async append(session: ActiveSession, entries: TranscriptEntry[], later = false): Promise<void> {
    const ephemeral = this.ephemeral.get(session);
    if (ephemeral) ephemeral.push(...entries);
    else if (later) this.unwritten.set(session, [...(this.unwritten.get(session) ?? []), ...entries]);
    else {
      const waiting = this.unwritten.get(session) ?? [];
      this.unwritten.delete(session);
      try {
        await this.transcripts.append(session.entry.sessionId, [...waiting, ...entries]);
      } catch (error) {
        if (waiting.length) this.unwritten.set(session, [...waiting, ...(this.unwritten.get(session) ?? [])]);
        throw error;
      }
    }
    session.entry.messageCount += entries.filter((e) => e.type === 'message').length;
  }

  /** Writes the entries still waiting for an append. */
  async flush(session: ActiveSession): Promise<void> {
    if (this.unwritten.get(session)?.length) await this.append(session, []);
  }
}
