import type { AgentRuntime } from '../agent/runtime.ts';
import type { WarmOptions } from '../tokens/tokens.ts';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { Clock } from '../core/clock.ts';
import type { Logger } from '../core/logger.ts';
import type { PairingStore } from '../routing/pairing.ts';
import type { Inbox } from './inbox.ts';
import type { MediaStore } from '../media/media-store.ts';
import type { QueueTimers } from './queue-mode.ts';
import type { RateBuckets } from './rate-buckets.ts';
import type { LiveTimers } from './live-reply.ts';
import type { TypingTimers } from './typing-loop.ts';
import type { SharedGroupContext, SharedQueue } from './shared-queue.ts';

/** Options of the `Gateway`; its `Admission` reads them too. */
export interface GatewayOptions {
  config: ResolvedConfig;
  runtime: AgentRuntime;
  clock: Clock;
  logger: Logger;
  inbox?: Inbox;
  /** Cluster mode: the work queue the replicas share (then there is no inbox journal). */
  queue?: SharedQueue;
  /** Cluster mode: group context kept in the shared database. */
  sharedGroupContext?: SharedGroupContext;
  /** Cluster mode: `limits.perSender`'s buckets in the shared database (default: this process's memory). */
  rateBuckets?: RateBuckets;
  /** Called after `/stop` stopped a session here (cluster mode tells the other replicas). */
  onStop?: (key: string) => void;
  pairing?: PairingStore;
  /** How often the typing indicator is refreshed while a turn runs (default: a little before the adapter's `typingLapseMs`). */
  typingIntervalMs?: number;
  /** Timers of the typing refresh (tests fire them themselves). */
  typingTimers?: TypingTimers;
  /** Timers of live replies' cadence (SPEC §16; tests pass their own). */
  liveTimers?: LiveTimers;
  /** Timers of the queue mode `collect` debounce (tests fire them themselves). */
  queueTimers?: QueueTimers;
  /** Where a file sent with `send_file` is copied (the web chat links it, SPEC §15). */
  mediaStore?: MediaStore;
  /** How long texts' token counts are warmed before their turn (tests inject a clock and yields). */
  warm?: WarmOptions;
}

/** Counters the gateway keeps (read by /status and metrics). */
export interface GatewayStats {
  accepted: number;
  duplicates: number;
  blocked: number;
  skipped: number;
  failed: number;
  rateLimited: number;
}
