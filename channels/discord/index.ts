import type { ChannelAdapter, ChannelStatus } from '../../src/core/channel-adapter.ts';
import { ChannelError } from '../../src/core/errors.ts';
import type { ChannelFactoryContext } from '../types.ts';
import type { DiscordAccountConfig } from '../../src/config/resolved.ts';

/** Options of {@link createDiscordChannel}. */
export interface DiscordChannelOptions extends ChannelFactoryContext {
  account: DiscordAccountConfig;
}

/** The Discord channel of one account. Placeholder until the Discord issue lands: it reports that it is not built. */
export function createDiscordChannel(options: DiscordChannelOptions): ChannelAdapter {
  let status: ChannelStatus = 'stopped';
  return {
    id: 'discord',
    accountId: options.account.accountId,
    get status() { return status; },
    async start() {
      status = 'failed';
      throw new ChannelError('CHANNEL_NOT_BUILT', 'Discord support is not built in this version yet.');
    },
    async stop() { status = 'stopped'; },
    async send() { throw new ChannelError('CHANNEL_NOT_BUILT', 'Discord support is not built in this version yet.'); },
  };
}
