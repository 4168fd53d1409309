import type { ResolvedConfig } from '../src/config/resolved.ts';
import type { ChannelAdapter } from '../src/core/channel-adapter.ts';
import { createDiscordChannel } from './discord/index.ts';
import { createSlackChannel } from './slack/index.ts';
import { createTelegramChannel } from './telegram/index.ts';
import type { ChannelFactoryContext } from './types.ts';
import { createWebchatChannel } from './webchat/index.ts';

export type { ChannelFactoryContext } from './types.ts';

/** One adapter per enabled account of every platform, plus the web chat. */
export function createChannelAdapters(config: ResolvedConfig, context: ChannelFactoryContext): ChannelAdapter[] {
  const adapters: ChannelAdapter[] = [];
  if (config.channels.webchat.enabled) adapters.push(createWebchatChannel({ clock: context.clock }));
  for (const account of config.channels.telegram) if (account.enabled) adapters.push(createTelegramChannel({ ...context, account }));
  for (const account of config.channels.discord) if (account.enabled) adapters.push(createDiscordChannel({ ...context, account }));
  for (const account of config.channels.slack) if (account.enabled) adapters.push(createSlackChannel({ ...context, account }));
  return adapters;
}
