import { matchResetTrigger } from '../agent/commands/commands.ts';
import type { QueueConfig, QueueMode } from '../config/queue-mode.ts';
import type { TurnResult } from '../core/channel-adapter.ts';
import type { Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import type { QueuedJob } from './shared-queue.ts';

/** The timers of the `collect` debounce (tests fire them themselves). */
export interface QueueTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The process's own timers. */
export const realQueueTimers: QueueTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** One accepted message on its way to a turn, with what the gateway keeps about it (`meta`). */
export interface QueuedMessage<T> {
  message: InboundMessage;
  meta: T;
}

/**
 * What a lane job does when it starts: run a turn — its own message, the burst `joined` to it (collect), and what
 * `takeSteered` hands it at tool-call boundaries (steer) — or nothing, because another turn carried the message.
 */
export type TurnPlan<T> =
  | {
    kind: 'run';
    joined: QueuedMessage<T>[];
    takeSteered?: () => QueuedMessage<T>[];
    /** Messages this turn carries besides its own (joined and steered so far): marked done when the turn is. */
    carried(): QueuedMessage<T>[];
    /** The turn ended (the messages it carried settle with `result`). */
    end(result: TurnResult | undefined): void;
  }
  | { kind: 'carried'; result: Promise<TurnResult | undefined> };

/** Puts a turn for `primary` on the session's lane; `begin` is called when its lane job starts. Settles when it ends. */
export type LaneStart<T> = (primary: QueuedMessage<T>, begin: () => TurnPlan<T>) => Promise<TurnResult | undefined>;

/** Options of {@link QueueModes}. */
export interface QueueModesOptions {
  config: QueueConfig;
  timers: QueueTimers;
  logger: Logger;
  /** Stops the running turn of a session, the way `/stop` does, with the interrupt reason. */
  interrupt(key: string): boolean;
}

interface Item<T> extends QueuedMessage<T> {
  mode: QueueMode;
  /** Messages of one epoch may join one another's turns; anything that is not steered starts a new epoch. */
  epoch: number;
  /** A steered message some turn took up. */
  carrier?: Active<T>;
  /** Settles a collected message's own submission. */
  settle?: (result: TurnResult | undefined) => void;
}

interface Active<T> {
  epoch: number;
  steerable: boolean;
  /** Its message came from a person (not a command, not internal work): a newer one may interrupt it. */
  interruptible: boolean;
  interrupted: boolean;
  carried: Item<T>[];
  result: Promise<TurnResult | undefined>;
  settle: (result: TurnResult | undefined) => void;
}

interface Batch<T> {
  items: Item<T>[];
  timer?: unknown;
  /** On the lane already (the debounce passed, or something else came after it); still taking messages until it starts. */
  queued: boolean;
}

interface KeyState<T> {
  epoch: number;
  active?: Active<T>;
  collecting?: Batch<T>;
  /** Steered messages queued on the lane and not started yet, nor taken by a turn. */
  waiting: Item<T>[];
}

/** Whether a message takes part in the queue modes: a person's message, not a command or reset trigger, not an API call or internal work. */
export function joinsQueueMode(message: InboundMessage, resetTriggers: readonly string[]): boolean {
  if (message.internal || message.ephemeral || message.channel === 'api') return false;
  const text = message.text.trim();
  return !text.startsWith('/') && !matchResetTrigger(text, [...resetTriggers]);
}

/**
 * Queue modes (SPEC §16), per session key, in front of the lanes. `followup`: each message its own turn. `collect`:
 * a burst (messages `debounceMs` apart at most, and whatever arrives until its turn starts) is one turn carrying all.
 * `steer`: a message that arrives while a turn runs is queued as usual and offered to that turn at its tool-call
 * boundaries; taken, it gets no turn of its own, else it runs as the next turn. `interrupt`: the running turn is
 * stopped (the `/stop` path) and the new message queued. Commands, reset triggers and internal work are never
 * collected or steered: they close the burst and the epoch, so order of arrival is kept.
 */
export class QueueModes<T> {
  private readonly options: QueueModesOptions;
  private readonly states = new Map<string, KeyState<T>>();

  constructor(options: QueueModesOptions) {
    this.options = options;
  }

  /** The mode of a message's channel. */
  modeOf(message: InboundMessage): QueueMode {
    return this.options.config.byChannel[message.channel] ?? this.options.config.mode;
  }

  /** Takes a message toward its session's lane; settles with the result of the turn that answered it. */
  admit(key: string, queued: QueuedMessage<T>, participates: boolean, start: LaneStart<T>): Promise<TurnResult | undefined> {
    const mode = participates ? this.modeOf(queued.message) : 'followup';
    const state = this.stateOf(key);
    if (mode !== 'collect') this.flush(key, state, start);
    if (mode !== 'steer') state.epoch++;
    const item: Item<T> = { ...queued, mode, epoch: state.epoch };
    if (!participates) return start(item, () => this.begin(key, item, false));
    if (mode === 'collect') return this.collect(key, state, item, start);
    if (mode === 'steer') state.waiting.push(item);
    if (mode === 'interrupt' && state.active?.interruptible && !state.active.interrupted) {
      state.active.interrupted = true;
      if (this.options.interrupt(key)) this.options.logger.info({ sessionKey: key }, 'a newer message stops the running turn (queue mode interrupt)');
    }
    return start(item, () => this.begin(key, item, true));
  }

  /** Shutdown: bursts still in their debounce are not started (their messages stay journaled for the next start). */
  close(): void {
    for (const state of this.states.values()) {
      const batch = state.collecting;
      if (batch && !batch.queued) {
        this.options.timers.clearTimeout(batch.timer);
        for (const item of batch.items) item.settle?.(undefined);
      }
    }
    this.states.clear();
  }

  private stateOf(key: string): KeyState<T> {
    let state = this.states.get(key);
    if (!state) {
      state = { epoch: 0, waiting: [] };
      this.states.set(key, state);
    }
    return state;
  }

  private cleanup(key: string): void {
    const state = this.states.get(key);
    if (state && !state.active && !state.collecting && !state.waiting.length) this.states.delete(key);
  }

  private collect(key: string, state: KeyState<T>, item: Item<T>, start: LaneStart<T>): Promise<TurnResult | undefined> {
    const done = new Promise<TurnResult | undefined>((resolve) => { item.settle = resolve; });
    let batch = state.collecting;
    if (!batch) {
      batch = { items: [], queued: false };
      state.collecting = batch;
    }
    batch.items.push(item);
    if (!batch.queued) {
      // The debounce restarts with each message of the burst.
      if (batch.timer !== undefined) this.options.timers.clearTimeout(batch.timer);
      const current = batch;
      batch.timer = this.options.timers.setTimeout(() => this.queueBatch(key, current, start), this.options.config.debounceMs);
    }
    return done;
  }

  /** Puts a burst on the lane; it goes on taking messages until its turn starts. */
  private queueBatch(key: string, batch: Batch<T>, start: LaneStart<T>): void {
    if (batch.queued) return;
    batch.queued = true;
    batch.timer = undefined;
    const primary = batch.items[0] as Item<T>;
    void start(primary, () => {
      const state = this.stateOf(key);
      if (state.collecting === batch) state.collecting = undefined;
      return this.beginTurn(key, state, primary, batch.items.slice(1), true);
    }).then((result) => {
      for (const item of batch.items) item.settle?.(result);
    });
  }

  /** A message that is not collected closes the open burst: it goes on the lane now, ahead of that message. */
  private flush(key: string, state: KeyState<T>, start: LaneStart<T>): void {
    const batch = state.collecting;
    if (!batch) return;
    state.collecting = undefined;
    if (!batch.queued) {
      this.options.timers.clearTimeout(batch.timer);
      this.queueBatch(key, batch, start);
    }
  }

  private begin(key: string, item: Item<T>, interruptible: boolean): TurnPlan<T> {
    if (item.carrier) return { kind: 'carried', result: item.carrier.result };
    const state = this.stateOf(key);
    state.waiting = state.waiting.filter((w) => w !== item);
    return this.beginTurn(key, state, item, [], interruptible);
  }

  private beginTurn(key: string, state: KeyState<T>, item: Item<T>, joined: Item<T>[], interruptible: boolean): TurnPlan<T> {
    let settle: (result: TurnResult | undefined) => void = () => undefined;
    const result = new Promise<TurnResult | undefined>((resolve) => { settle = resolve; });
    const active: Active<T> = { epoch: item.epoch, steerable: item.mode === 'steer', interruptible, interrupted: false, carried: [...joined], result, settle };
    state.active = active;
    if (joined.length) this.options.logger.info({ sessionKey: key, messages: joined.length + 1 }, 'one turn answers a burst of messages (queue mode collect)');
    return {
      kind: 'run',
      joined,
      ...(active.steerable ? { takeSteered: () => this.take(key, active) } : {}),
      carried: () => active.carried,
      end: (turnResult) => {
        const current = this.states.get(key);
        if (current?.active === active) current.active = undefined;
        active.settle(turnResult);
        this.cleanup(key);
      },
    };
  }

  /** Steer: the messages of the running turn's epoch waiting on the lane join it. */
  private take(key: string, active: Active<T>): QueuedMessage<T>[] {
    const state = this.states.get(key);
    if (!state || state.active !== active || active.interrupted) return [];
    const taken = state.waiting.filter((w) => w.epoch === active.epoch && w.mode === 'steer');
    if (!taken.length) return [];
    state.waiting = state.waiting.filter((w) => !taken.includes(w));
    for (const item of taken) item.carrier = active;
    active.carried.push(...taken);
    return taken;
  }
}

/** The queue-mode fields of a turn's input: the burst joined to it, and the steer hand-over. */
export function turnJoins<T>(plan: TurnPlan<T> | undefined): { joined?: InboundMessage[]; takeSteered?: () => InboundMessage[] } {
  if (plan?.kind !== 'run') return {};
  const take = plan.takeSteered;
  return {
    ...(plan.joined.length ? { joined: plan.joined.map((q) => q.message) } : {}),
    ...(take ? { takeSteered: () => take().map((q) => q.message) } : {}),
  };
}

/** The queue-mode fields of a claimed job's turn (cluster mode): the burst the shared queue joined, its steer hand-over. */
export
function jobJoins(job: QueuedJob): { joined?: InboundMessage[]; takeSteered?: () => Promise<InboundMessage[]> } {
  const take = job.takeSteered;
  return {
    ...(job.joined?.length ? { joined: job.joined.map((j) => j.message) } : {}),
    ...(take ? { takeSteered: async () => (await take()).map((j) => j.message) } : {}),
  };
}
