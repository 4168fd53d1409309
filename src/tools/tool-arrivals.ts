import type { ToolPolicy } from '../config/schema.ts';
import type { Logger } from '../core/logger.ts';
import { policyMayInclude } from './presets.ts';
import type { TimeoutHandle } from './timeout.ts';

/** A group of tools on its way: an MCP server connecting, whose tools are registered once it is ready. */
export interface ArrivingGroup {
  /** The group its tools will be in (`mcp:<server>`). */
  group: string;
  /** The prefix of its tools' names (`<server>__`), for `allow` entries that name single tools. */
  toolPrefix: string;
  /** How the log line names it (`MCP server files`). */
  label: string;
  /** The longest a turn waits for it (`mcp.connectTimeoutMs`). */
  waitMs: number;
  /** While it is connecting (first time or again): settles when that ends, ready or not. Undefined otherwise. */
  arriving(): Promise<void> | undefined;
  /** Why its tools are not there (its last error), or undefined when they are. */
  missing(): string | undefined;
}

/** Options of {@link ToolArrivals}. */
export interface ToolArrivalsOptions {
  /** The timer of one wait (tests fire it themselves). */
  timeout: (ms: number) => TimeoutHandle;
}

/** What a wait needs of its turn. */
export interface ArrivalWait {
  /** The turn's signal: a stopped turn stops waiting at once. */
  signal: AbortSignal;
  /** The turn's logger (its lines carry the correlation id). */
  logger: Logger;
}

/**
 * The tool groups still connecting, and a turn's wait for those its policy would enable (SPEC §11: a turn
 * never silently runs without a server that is still connecting). Each is waited for at most its `waitMs`;
 * one that is not ready when the wait ends is left out of the turn, and one line of the turn's log says which
 * and why. Groups that are not connecting (ready, or failed and waiting to retry) are never waited for.
 */
export class ToolArrivals {
  private readonly groups = new Set<ArrivingGroup>();
  private readonly options: ToolArrivalsOptions;

  constructor(options: ToolArrivalsOptions) {
    this.options = options;
  }

  /** Adds a group; the function returned removes it. */
  add(group: ArrivingGroup): () => void {
    this.groups.add(group);
    return () => { this.groups.delete(group); };
  }

  /**
   * The wait for the connecting groups `policy` would enable, or undefined when there is none (every turn asks,
   * so that case makes no promise). The wait never rejects.
   */
  wait(policy: ToolPolicy, turn: ArrivalWait): Promise<void> | undefined {
    let waiting: ArrivingGroup[] | undefined;
    for (const g of this.groups) if (g.arriving() && policyMayInclude(policy, g.group, g.toolPrefix)) (waiting ??= []).push(g);
    return waiting && this.waitFor(waiting, turn);
  }

  private async waitFor(groups: ArrivingGroup[], turn: ArrivalWait): Promise<void> {
    turn.logger.debug({ groups: groups.map((g) => g.group) }, 'waiting for tools still connecting');
    await Promise.all(groups.map(async (g) => {
      const timer = this.options.timeout(g.waitMs);
      try {
        const arriving = g.arriving();
        if (arriving) await firstOf(arriving, [timer.signal, turn.signal]);
      } finally {
        timer.clear();
      }
    }));
    if (turn.signal.aborted) return;
    const leftOut = groups.flatMap((g) => {
      const reason = g.arriving() ? `still connecting after ${g.waitMs / 1000} s` : g.missing();
      return reason ? [{ group: g.group, label: g.label, reason }] : [];
    });
    if (leftOut.length) {
      turn.logger.warn({ leftOut: leftOut.map(({ group, reason }) => ({ group, reason })) },
        `left out of this turn: ${leftOut.map((l) => `${l.label} (${l.reason})`).join(', ')}`);
    }
  }
}

/** Resolves when `promise` settles or any of `signals` aborts, whichever comes first; leaves no listener behind. */
function firstOf(promise: Promise<void>, signals: AbortSignal[]): Promise<void> {
  return new Promise((resolve) => {
    if (signals.some((s) => s.aborted)) { resolve(); return; }
    const done = () => {
      for (const s of signals) s.removeEventListener('abort', done);
      resolve();
    };
    for (const s of signals) s.addEventListener('abort', done, { once: true });
    promise.then(done, done);
  });
}
