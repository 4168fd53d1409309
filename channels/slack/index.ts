import type { ChannelAdapter, ChannelStatus } from '../../src/core/channel-adapter.ts';
import { ChannelError } from '../../src/core/errors.ts';
import type { ChannelFactoryContext } from '../types.ts';
import type { SlackAccountConfig } from '../../src/config/resolved.ts';

/** Options of {@link createSlackChannel}. */
export interface SlackChannelOptions extends ChannelFactoryContext {
  account: SlackAccountConfig;
}

/** The Slack channel of one account. Placeholder until the Slack issue lands: it reports that it is not built. */
export function createSlackChannel(options: SlackChannelOptions): ChannelAdapter {
  let status: ChannelStatus = 'stopped';
  return {
    id: 'slack',
    accountId: options.account.accountId,
    get status() { return status; },
    async start() {
      status = 'failed';
      throw new ChannelError('CHANNEL_NOT_BUILT', 'Slack support is not built in this version yet.');
    },
    async stop() { status = 'stopped'; },
    async send() { throw new ChannelError('CHANNEL_NOT_BUILT', 'Slack support is not built in this version yet.'); },
  };
}
