import type pg from 'pg';
import type { QueueMode } from '../config/queue-mode.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import type { QueueModePolicy, QueuedJob } from '../gateway/shared-queue.ts';
import type { Fence } from './fence.ts';
import { MARK_CARRIED, PENDING_AFTER } from './work-queue-sql.ts';

/** A queued message's row as the queue reads it. */
export interface QueueRow {
  seq: string;
  message: InboundMessage;
  correlation_id: string;
  attempts: number;
  sent: number;
  sending: number;
  live: string[] | null;
  accepted_ms: number | null;
}

/** The turn of a claimed message while it runs: what it carries and what the queue modes did to it. */
export interface ClaimedTurn {
  readonly key: string;
  readonly seq: number;
  /** The last message the turn carries (its own, or the last joined or steered one): `done` marks up to it. */
  last: number;
  /** Its message's mode; undefined when it takes no part (a command, internal work, a rerun). */
  readonly mode: QueueMode | undefined;
  interrupted: boolean;
  /** When steer last looked for messages (local time); a notice of new work after it makes the next boundary look. */
  lookedAt: number;
  looking?: boolean;
  lookAgain?: boolean;
}

/** Options of {@link ClaimedQueueModes}. */
export interface ClaimedQueueModesOptions {
  policy: QueueModePolicy;
  pool: pg.Pool;
  logger: Logger;
  /** The database's time now (ms): the debounce is measured against acceptance times. */
  dbNow(): number;
  /** Whether the queue closed (a burst in its debounce then runs with what it has). */
  closed(): boolean;
  /** The time the last notice of new work for a session came (local ms), or undefined. */
  noticedAt(key: string): number | undefined;
  /** A row as a job of this replica. */
  jobOf(key: string, row: QueueRow): QueuedJob;
}

/**
 * The queue modes (SPEC §16) in cluster mode, applied by the replica that claimed a session, under its lock, to the
 * messages queued in the shared database: `collect` waits for the burst's debounce and joins the burst to the turn;
 * `steer` takes the messages accepted since at each tool-call boundary (only when a notice of new work came, so a
 * quiet session costs no statement); `interrupt` stops the running turn when a newer message that takes part comes.
 * Messages a turn carries get one more attempt (a rerun after a crash is a replay, which never appends them twice)
 * and are marked done with it. A message that takes another mode, or none, closes the burst: order is kept.
 */
export class ClaimedQueueModes {
  constructor(private readonly options: ClaimedQueueModesOptions) {}

  /** A claimed job's turn is about to run: its burst joined (collect), its steer hand-over set. */
  async begin(job: QueuedJob, row: QueueRow, fence: Fence): Promise<ClaimedTurn> {
    const mode = row.attempts === 0 ? this.options.policy.modeOf(row.message) : undefined;
    const turn: ClaimedTurn = { key: job.key, seq: job.seq, last: job.seq, mode, interrupted: false, lookedAt: Date.now() };
    if (mode === 'collect') {
      const joined = await this.collect(turn, row.accepted_ms ?? this.options.dbNow(), fence);
      if (joined.length) {
        job.joined = joined;
        this.options.logger.info({ sessionKey: job.key, messages: joined.length + 1 }, 'one turn answers a burst of messages (queue mode collect)');
      }
    }
    if (mode === 'steer') job.takeSteered = () => this.steer(turn, fence);
    return turn;
  }

  /** New work was noticed for a session whose turn runs here: a newer message may stop it (`interrupt`). */
  noticed(turn: ClaimedTurn): void {
    const { policy } = this.options;
    if (!policy.interrupts || turn.mode === undefined || turn.interrupted) return;
    if (turn.looking) {
      turn.lookAgain = true;
      return;
    }
    turn.looking = true;
    void this.lookForInterrupt(turn).finally(() => {
      turn.looking = false;
      if (turn.lookAgain) {
        turn.lookAgain = false;
        this.noticed(turn);
      }
    });
  }

  private async lookForInterrupt(turn: ClaimedTurn): Promise<void> {
    try {
      const { rows } = await this.options.pool.query<QueueRow>(PENDING_AFTER, [turn.key, turn.last]);
      if (turn.interrupted || !rows.some((r) => r.attempts === 0 && this.options.policy.modeOf(r.message) === 'interrupt')) return;
      turn.interrupted = true;
      this.options.logger.info({ sessionKey: turn.key }, 'a newer message stops the running turn (queue mode interrupt)');
      this.options.policy.interrupt(turn.key);
    } catch (error) {
      this.options.logger.warn({ err: error, sessionKey: turn.key }, 'could not look at the messages queued behind a running turn; none stops it');
    }
  }

  /** `collect`: waits until the burst's newest message is `debounceMs` old, taking what joined meanwhile. */
  private async collect(turn: ClaimedTurn, acceptedMs: number, fence: Fence): Promise<QueuedJob[]> {
    const { policy } = this.options;
    const joined: QueuedJob[] = [];
    let newest = acceptedMs;
    for (;;) {
      const wait = newest + policy.debounceMs - this.options.dbNow();
      if (wait > 0) await new Promise<void>((resolve) => policy.timers.setTimeout(resolve, wait));
      if (this.options.closed()) return joined;
      const { rows, closed } = await this.take(turn, 'collect', fence);
      joined.push(...rows.map((r) => this.options.jobOf(turn.key, r)));
      if (!rows.length || closed) return joined;
      newest = Math.max(newest, ...rows.map((r) => r.accepted_ms ?? newest));
    }
  }

  /** `steer` at a tool-call boundary: the messages accepted since, when a notice of new work came since the last look. */
  private async steer(turn: ClaimedTurn, fence: Fence): Promise<QueuedJob[]> {
    const noticed = this.options.noticedAt(turn.key);
    if (turn.interrupted || noticed === undefined || noticed < turn.lookedAt) return [];
    turn.lookedAt = Date.now();
    const { rows } = await this.take(turn, 'steer', fence);
    if (rows.length) this.options.logger.info({ sessionKey: turn.key, messages: rows.length }, 'queued messages join the running turn (queue mode steer)');
    return rows.map((r) => this.options.jobOf(turn.key, r));
  }

  /**
   * The messages right after the turn's last that take `mode`, in order, marked as carried by it; `closed` when a
   * message that does not (another mode, a command, a rerun) comes after them.
   */
  private async take(turn: ClaimedTurn, mode: QueueMode, fence: Fence): Promise<{ rows: QueueRow[]; closed: boolean }> {
    const { rows } = await fence.client.query<QueueRow>(PENDING_AFTER, [turn.key, turn.last]);
    const taken: QueueRow[] = [];
    for (const row of rows) {
      if (Number(row.seq) !== turn.last + taken.length + 1 || row.attempts > 0 || this.options.policy.modeOf(row.message) !== mode) break;
      taken.push(row);
    }
    if (taken.length) {
      const last = Number(taken.at(-1)!.seq);
      await fence.client.query(MARK_CARRIED, [turn.key, turn.last + 1, last]);
      turn.last = last;
    }
    return { rows: taken, closed: taken.length < rows.length };
  }
}
