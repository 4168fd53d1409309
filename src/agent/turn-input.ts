import type { Logger } from '../core/logger.ts';
import type { InboundMessage, OutboundFile } from '../core/message.ts';
import type { SessionEntry } from '../sessions/entry.ts';

/** A message kept from a group chat without a run, given to the next run as context. */
export interface GroupContextItem {
  name: string;
  text: string;
  at: number;
}

/** One turn to run. */
export interface TurnInput {
  message: InboundMessage;
  sessionKey: string;
  correlationId: string;
  signal: AbortSignal;
  onDelta?: (text: string) => void;
  groupContext?: GroupContextItem[];
  logger?: Logger;
  /** The caller that may go away (an HTTP client); it stops the turn, except a web chat page's or a run toward a goal in the background. */
  clientSignal?: AbortSignal;
  /** Gives the lane's concurrency slot back while `work` waits on another session (sessions_yield). */
  lendSlot?: <T>(work: () => Promise<T>) => Promise<T>;
  /** The message is replayed after a crash or stop: what the transcript already holds is not written or run again. */
  replayed?: boolean;
  /** The session's run state before this turn (set by the runtime). */
  priorRunState?: SessionEntry['runState'];
  /** Queue mode `collect`: messages answered together with `message`, each its own user entry after it, in order. */
  joined?: InboundMessage[];
  /** Sends a file into the chat the turn answers (the `send_file` tool); absent when there is none. */
  sendFile?: (file: OutboundFile, caption?: string) => Promise<void>;
  /**
   * Queue mode `steer`: takes the messages that arrived since, at a tool-call boundary; the next model request carries
   * them (a promise in cluster mode, where they are taken from the shared queue).
   */
  takeSteered?: () => InboundMessage[] | Promise<InboundMessage[]>;
}
