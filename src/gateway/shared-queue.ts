import type { QueueMode } from '../config/queue-mode.ts';
import type { TurnResult } from '../core/channel-adapter.ts';
import type { InboundMessage } from '../core/message.ts';
import type { GroupContextItem } from '../agent/turn-input.ts';

/** Group context kept where every replica sees it (cluster mode). */
export interface SharedGroupContext {
  add(key: string, item: GroupContextItem): Promise<void>;
  /** Returns and deletes what was kept for a key, oldest first. */
  take(key: string): Promise<GroupContextItem[] | undefined>;
}

/** A queued message a replica claimed and runs. */
export interface QueuedJob {
  message: InboundMessage;
  key: string;
  correlationId: string;
  /** Its place in the session's order of acceptance. */
  seq: number;
  /** An earlier attempt started (a crash, a lost lock): the transcript may already hold its user entry or answer. */
  replayed: boolean;
  /** Replies of an earlier attempt the platform already accepted. */
  sent: number;
  /** Messages an earlier attempt's live reply posted (a rerun edits them into the answer instead of posting a copy). */
  live?: string[];
  /** Queue mode `collect`: the burst's later messages, answered by this job's turn and marked done with it. */
  joined?: QueuedJob[];
  /** Queue mode `steer`: takes the messages accepted since, at a tool-call boundary; marked done with this job. */
  takeSteered?: () => Promise<QueuedJob[]>;
}

/** The queue modes (SPEC §16) as the shared queue applies them to the messages it claims. */
export interface QueueModePolicy {
  /** A message's mode, or undefined when it takes no part (a command, a reset trigger, internal work). */
  modeOf(message: InboundMessage): QueueMode | undefined;
  /** `collect`: how long a burst stays open after its newest message. */
  debounceMs: number;
  /** Some channel uses `interrupt` (otherwise no message is looked at for it). */
  interrupts: boolean;
  /** Stops the running turn of a session (`interrupt`), as `/stop` does, with the interrupt reason. */
  interrupt(key: string): void;
  /** The debounce's timers (tests fire them themselves). */
  timers: { setTimeout(fn: () => void, ms: number): unknown };
}

/** Why a delivery id is recorded without queueing its message. */
export type SeenOutcome = 'accepted' | 'blocked' | 'skipped' | 'refused' | 'immediate';

/**
 * The work queue several replicas share (cluster mode, SPEC §13): intake committed before the platform is
 * acknowledged, one replica at a time per session, order of acceptance kept. One machine uses the inbox
 * journal and the in-memory lanes instead.
 */
export interface SharedQueue {
  /** Dedupe on the delivery id, the session's next sequence number, the row: one committed transaction. */
  accept(message: InboundMessage, key: string, correlationId: string): Promise<{ accepted: true; seq: number } | { accepted: false }>;
  /** Records a delivery id whose message is not queued; false when it had been seen already. */
  markSeen(message: InboundMessage, outcome: SeenOutcome): Promise<boolean>;
  /** Settles with the turn's result once message `seq` of `key` is done, on whichever replica ran it. */
  whenDone(key: string, seq: number): Promise<TurnResult | undefined>;
  /**
   * Runs `work` holding the session's lock (waiting for another replica to give it back), its writes fenced by it.
   * With `job` (a message this replica claimed), `work` runs under that claim's lock and never takes the lock
   * afresh: once the claim's lock is gone another replica runs the message, so this rejects with
   * `LeaseLostError` (a lane task that started after the loss would otherwise wait for the lock and run the
   * message a second time).
   */
  runExclusive<T>(key: string, work: () => Promise<T>, job?: QueuedJob): Promise<T>;
  /** Reply `index` of the job is about to be sent. */
  sending(job: QueuedJob, index: number): Promise<void>;
  /** The messages the job's live reply posted so far (SPEC §16), journaled with it before the next edit. */
  live(job: QueuedJob, ids: readonly string[]): Promise<void>;
  /** The first `count` replies of the job reached the platform. */
  sent(job: QueuedJob, count: number): Promise<void>;
  /** The job is finished; its result is kept for waiters. */
  done(job: QueuedJob, result: TurnResult | undefined): Promise<void>;
  /** A session's work on any replica: `running` when some replica holds its lock, `waiting` its messages not done. */
  runState(key: string): Promise<{ running: boolean; waiting: number }>;
  /** True when the code running now held its session's lock and lost it (its connection ended). */
  lockLost(): Promise<boolean>;
  /**
   * Starts claiming sessions with queued work; `run` runs one job on this replica's lanes. With `modes`, a claimed
   * message's turn carries the burst after it (`collect`), takes messages at its tool-call boundaries (`steer`), or
   * is stopped by a newer message (`interrupt`); `done` then marks every message the turn carried.
   */
  start(run: (job: QueuedJob) => Promise<TurnResult | undefined>, modes?: QueueModePolicy): void;
  close(): void;
}
