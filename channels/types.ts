import type { ChannelCluster } from '../src/core/channel-leases.ts';
import type { Clock } from '../src/core/clock.ts';
import type { DeliveryRetryPolicy } from '../src/core/delivery-retry.ts';
import type { Logger } from '../src/core/logger.ts';

/** What every channel factory receives besides its account config. */
export interface ChannelFactoryContext {
  clock: Clock;
  logger: Logger;
  /** The gateway's state folder (channels may keep small files there, such as offsets). */
  stateDir: string;
  /** Public base URL of the gateway, for webhook registration (e.g. https://bot.example.com). */
  publicUrl?: string;
  /**
   * Cluster mode (SPEC §13): leases for what only one replica may ingest (the Telegram poller, Discord
   * shards) and the shared watermarks for back-filling. Absent on one machine.
   */
  cluster?: ChannelCluster;
  /**
   * How sends, edits and uploads the platform did not take are retried (`delivery`, SPEC §16); the
   * defaults when absent.
   */
  delivery?: DeliveryRetryPolicy;
  /**
   * The wait after a poll that brought nothing readable (Telegram getUpdates answering garbage), doubling
   * while it lasts: default 1 s to 30 s (tests make it short).
   */
  pollBackoff?: { baseMs?: number; maxMs?: number };
}
