import type pg from 'pg';
import type { TurnResult } from '../core/channel-adapter.ts';

/** Finished messages' results, by session key and sequence (`sb_inbox` keeps them for a day). */
const RESULTS = `
SELECT i.session_key, i.seq, i.result FROM sb_inbox i JOIN unnest($1::text[], $2::bigint[]) AS w (k, s) ON i.session_key = w.k AND i.seq = w.s
WHERE i.done_at IS NOT NULL`;

type ResultRow = { session_key: string; seq: string; result: TurnResult | null };

/**
 * Who waits for which queued message's result (a tool waiting on another session's turn, an HTTP caller), on any
 * replica: settled by this replica's own done marks, by `sb_done` notices (the result is read from the database),
 * and, while anyone waits, by a look-up of all of them in one statement every `pollMs` (every 5 × `pollMs` while
 * notices flow; they are lost while the listener reconnects).
 */
export class DoneWaiters {
  private readonly waiters = new Map<string, { resolve: (r: TurnResult | undefined) => void; promise: Promise<TurnResult | undefined> }>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** When the last `sb_done` notice came. */
  private lastNotice = 0;

  constructor(private readonly options: { pool: pg.Pool; pollMs: number }) {}

  /** Settles with the result of message `seq` of `key` once it is done. */
  wait(key: string, seq: number): Promise<TurnResult | undefined> {
    const id = idOf(key, seq);
    let waiter = this.waiters.get(id);
    if (!waiter) {
      let resolve!: (r: TurnResult | undefined) => void;
      const promise = new Promise<TurnResult | undefined>((r) => { resolve = r; });
      waiter = { resolve, promise };
      this.waiters.set(id, waiter);
      this.pollSoon();
    }
    return waiter.promise;
  }

  /** An `sb_done` notice came (while they flow, the poll runs less often). */
  heard(): void {
    this.lastNotice = Date.now();
  }

  /** Messages `seq` to `last` of `key` were done on another replica: their waiters get the results read back. */
  noticed(key: string, seq: number, last = seq): void {
    const waited: [string, number][] = [];
    for (let s = seq; s <= Math.min(last, seq + 1000); s++) if (this.waiters.has(idOf(key, s))) waited.push([key, s]);
    if (waited.length) void this.fetch(waited);
  }

  /** A message this replica marked done. */
  settle(key: string, seq: number, result: TurnResult | undefined): void {
    const id = idOf(key, seq);
    const waiter = this.waiters.get(id);
    if (!waiter) return;
    this.waiters.delete(id);
    waiter.resolve(result);
  }

  /** Stops looking; every waiter gets undefined. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    for (const w of this.waiters.values()) w.resolve(undefined);
    this.waiters.clear();
  }

  /** Settles the waiters of those finished among `jobs`, in one statement. */
  private async fetch(jobs: [string, number][]): Promise<void> {
    const { rows } = await this.options.pool.query<ResultRow>(RESULTS, [jobs.map((j) => j[0]), jobs.map((j) => j[1])])
      .catch(() => ({ rows: [] as ResultRow[] }));
    for (const r of rows) this.settle(r.session_key, Number(r.seq), r.result ?? undefined);
  }

  private pollSoon(): void {
    if (this.timer || this.closed) return;
    const flowing = Date.now() - this.lastNotice < this.options.pollMs;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const jobs = [...this.waiters.keys()].slice(0, 1000).map((id) => {
        const [key, seq] = id.split('\u0000') as [string, string];
        return [key, Number(seq)] as [string, number];
      });
      void this.fetch(jobs).finally(() => { if (this.waiters.size) this.pollSoon(); });
    }, flowing ? 5 * this.options.pollMs : this.options.pollMs);
    this.timer.unref();
  }
}

function idOf(key: string, seq: number): string {
  return `${key}\u0000${seq}`;
}
