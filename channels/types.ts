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
}
