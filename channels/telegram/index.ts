import type { ChannelAdapter, ChannelStatus } from '../../src/core/channel-adapter.ts';
import { ChannelError } from '../../src/core/errors.ts';
import type { ChannelFactoryContext } from '../types.ts';
import type { TelegramAccountConfig } from '../../src/config/resolved.ts';

/** Options of {@link createTelegramChannel}. */
export interface TelegramChannelOptions extends ChannelFactoryContext {
  account: TelegramAccountConfig;
}

/** The Telegram channel of one account. Placeholder until the Telegram issue lands: it reports that it is not built. */
export function createTelegramChannel(options: TelegramChannelOptions): ChannelAdapter {
  let status: ChannelStatus = 'stopped';
  return {
    id: 'telegram',
    accountId: options.account.accountId,
    get status() { return status; },
    async start() {
      status = 'failed';
      throw new ChannelError('CHANNEL_NOT_BUILT', 'Telegram support is not built in this version yet.');
    },
    async stop() { status = 'stopped'; },
    async send() { throw new ChannelError('CHANNEL_NOT_BUILT', 'Telegram support is not built in this version yet.'); },
  };
}
