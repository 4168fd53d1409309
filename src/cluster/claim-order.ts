/**
 * The sessions a replica knows to have queued work but could not claim yet (its slots were full), each with the
 * acceptance time of its oldest waiting message (ms, the database's clock): a freed slot goes to the one that
 * waited longest, not to whichever message happened to arrive as the slot freed.
 */
export class ClaimOrder {
  private readonly waiting = new Map<string, number>();
  /** Sessions known only from another replica's notification (that replica, or a third, may run them first). */
  private readonly foreign = new Set<string>();

  constructor(private readonly limit = 10_000) {}

  get size(): number {
    return this.waiting.size;
  }

  /** Records `key` as waiting since `since` (an earlier time it is already known with is kept). */
  add(key: string, since: number, foreign = false): void {
    const known = this.waiting.get(key);
    if (known === undefined && this.waiting.size >= this.limit) return; // the poll's scan finds the rest
    if (!foreign) this.foreign.delete(key);
    else if (known === undefined) this.foreign.add(key);
    if (known === undefined || since < known) this.waiting.set(key, since);
  }

  delete(key: string): void {
    this.waiting.delete(key);
    this.foreign.delete(key);
  }

  /**
   * Forgets `key` if it is known only from another replica's notification: a message of it was just done
   * elsewhere, so the replica that ran it goes on with its queue (this one would most likely find nothing).
   */
  dropForeign(key: string): void {
    if (this.foreign.has(key)) this.delete(key);
  }

  /** True when some session waits since before `since`. */
  hasOlderThan(since: number): boolean {
    for (const t of this.waiting.values()) if (t < since) return true;
    return false;
  }

  /** Takes the session that waited longest (ties: the one known first). */
  takeOldest(): string | undefined {
    let best: string | undefined;
    let bestAt = Infinity;
    for (const [key, at] of this.waiting) if (at < bestAt) { best = key; bestAt = at; }
    if (best !== undefined) this.delete(best);
    return best;
  }
}
