import type { ChannelCluster } from '../src/core/channel-leases.ts';
import type { Clock } from '../src/core/clock.ts';
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
}
