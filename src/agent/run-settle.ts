import type { TurnResult } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import type { Logger } from '../core/logger.ts';
import { targetOf, type InboundMessage } from '../core/message.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { ActiveSession, SessionManager } from '../sessions/manager.ts';
import { isBackgroundKind, isShutdown, pauseGoalRun } from './runs.ts';
import { scopedEvent, type TurnEvents, type TurnScope } from './turn-events.ts';

/** What settling a session's run state needs. */
export interface RunSettlerDeps {
  sessions: SessionManager;
  events: TurnEvents;
  clock: Clock;
  /** The runtime's logger (for runs settled outside a turn). */
  logger: Logger;
}

/** True when a background batch should still run: a goal, background on, and a run that was not stopped or finished. */
export function goalRunContinues(entry: SessionEntry, backgroundEnabled: boolean): boolean {
  if (!entry.goal || !backgroundEnabled) return false;
  // `running` here means a batch was cut short (a lane runs one turn at a time): a replayed continuation goes on.
  return entry.runState === 'running' || entry.runState === 'continuing';
}

/**
 * Where a session's run state goes when a turn ends (finished, stopped, failed, or cut by shutdown and kept for
 * recovery), on `/stop` by key, and at start for a run the last process left `running`; and the entry writes that
 * record it.
 */
export class RunSettler {
  private readonly deps: RunSettlerDeps;

  constructor(deps: RunSettlerDeps) {
    this.deps = deps;
  }

  /** Persists an entry; a store outage is logged (the write is retried at the next turn or at shutdown), never thrown. */
  async persist(entry: SessionEntry, logger: Logger): Promise<void> {
    await this.deps.sessions.save(entry).catch((err: unknown) => {
      logger.error({ err, sessionKey: entry.key }, 'session entry not persisted after retries; it is written again at the next turn or at shutdown');
    });
  }

  /**
   * A turn that answered (a reply or a command): the run is idle again, the entry knows its sender and where to
   * deliver. `logger` is the turn's own, when it has one.
   */
  async finishEntry(session: ActiveSession, message: InboundMessage, logger: Logger | undefined, now: number, activity: boolean): Promise<void> {
    const entry = session.entry;
    if (activity) entry.updatedAt = now;
    if (entry.runState === 'running') entry.runState = 'idle';
    if (!message.internal) {
      if (message.sender.name && message.chatType === 'direct') entry.displayName = message.sender.name;
      entry.deliveryTarget = targetOf(message);
    }
    if (message.ephemeral) return;
    // The transcript already holds the turn; a store outage must not turn the reply into an apology.
    await this.persist(entry, logger ?? this.deps.logger);
  }

  /** A turn that ended without finishing its batch: stopped (a goal run pauses), failed, or cut by shutdown (kept for recovery). */
  async settleTurn(session: ActiveSession, message: InboundMessage, signal: AbortSignal, outcome: TurnResult['outcome'], logger: Logger, scope: () => TurnScope): Promise<void> {
    const entry = session.entry;
    // The batch of this turn began (its checkpoint carries the turn's correlation id): a stopped or failed one is
    // counted even when `/stop` already paused the run (runState `paused`, no longer `running`).
    const batchRan = entry.checkpoint?.correlationId === scope().correlationId;
    const batchEnded = (ended: 'stopped' | 'failed') => this.deps.events.emit('onBatchEnd', scopedEvent(scope(), {
      background: isBackgroundKind(message.internal?.kind), outcome: ended, batch: entry.checkpoint?.batch ?? 1, iterations: entry.checkpoint?.iteration ?? 0, at: this.deps.clock.now(),
    }));
    if (entry.runState !== 'running') {
      if (batchRan && outcome === 'stopped') batchEnded('stopped');
      return;
    }
    const shutdown = isShutdown(signal);
    if (shutdown) {
      // Left `running` with its checkpoint: the next start resumes it (or replays its message).
      logger.info({ checkpoint: entry.checkpoint }, 'turn cut short by shutdown; its checkpoint is kept for the next start');
    } else if (outcome === 'stopped') {
      entry.runState = entry.goal ? 'paused' : 'idle';
    } else if (outcome === 'failed') {
      entry.runState = 'failed';
    } else {
      entry.runState = 'idle';
    }
    if (outcome === 'stopped' || outcome === 'failed') batchEnded(outcome);
    if (!message.ephemeral) await this.persist(entry, logger);
  }

  /**
   * At start: a run the last process left `running` that nothing resumes ends `failed` (its turn died with that
   * process). Call it on the session's lane. True when the entry changed.
   */
  async settleStale(key: string): Promise<boolean> {
    const { sessions, logger } = this.deps;
    const stored = await sessions.get(key);
    if (!stored) return false;
    const session = await sessions.acquire({ ...stored });
    try {
      if (session.entry.runState !== 'running') return false;
      session.entry.runState = 'failed';
      await this.persist(session.entry, logger);
      logger.info({ sessionKey: key, checkpoint: session.entry.checkpoint }, 'a run the last stop left running ends failed: nothing resumes it');
      return true;
    } finally {
      sessions.release(session);
    }
  }

  /**
   * `/stop` for a stored key: `stopLane` aborts its running turn, and its goal run pauses. Undefined when the key
   * is unknown.
   */
  async stopStored(key: string, stopLane: () => boolean): Promise<{ entry: SessionEntry; stopped: boolean } | undefined> {
    const { sessions, logger } = this.deps;
    const stored = await sessions.get(key);
    if (!stored) return undefined;
    const stopped = stopLane();
    const session = await sessions.acquire({ ...stored });
    try {
      if (pauseGoalRun(session.entry)) await this.persist(session.entry, logger);
      return { entry: session.entry, stopped };
    } finally {
      sessions.release(session);
    }
  }
}
