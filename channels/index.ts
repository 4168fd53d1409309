import type { ResolvedConfig } from '../src/config/resolved.ts';
import type { ChannelAdapter } from '../src/core/channel-adapter.ts';
import type { ChannelFactoryContext } from './types.ts';
import { createWebchatChannel } from './webchat/index.ts';

export type { ChannelFactoryContext } from './types.ts';

/**
 * One adapter per enabled account of every platform, plus the web chat. Platform SDKs are loaded only when
 * one of their accounts is enabled, so a gateway without them starts fast.
 */
export async function createChannelAdapters(config: ResolvedConfig, context: ChannelFactoryContext): Promise<ChannelAdapter[]> {
  const adapters: ChannelAdapter[] = [];
  if (config.channels.webchat.enabled) adapters.push(createWebchatChannel({ clock: context.clock }));
  const telegram = config.channels.telegram.filter((a) => a.enabled);
  if (telegram.length) {
    const { createTelegramChannel } = await import('./telegram/index.ts');
    for (const account of telegram) adapters.push(createTelegramChannel({ ...context, account }));
  }
  const discord = config.channels.discord.filter((a) => a.enabled);
  if (discord.length) {
    const { createDiscordChannel } = await import('./discord/index.ts');
    for (const account of discord) adapters.push(createDiscordChannel({ ...context, account }));
  }
  const slack = config.channels.slack.filter((a) => a.enabled);
  if (slack.length) {
    const { createSlackChannel } = await import('./slack/index.ts');
    for (const account of slack) adapters.push(createSlackChannel({ ...context, account }));
  }
  return adapters;
}
