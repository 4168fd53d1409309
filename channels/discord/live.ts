import { Routes, type Client } from 'discord.js';
import type { LiveReplyCalls } from '../../src/core/channel-adapter.ts';
import { renderDiscord } from './render.ts';

/** Runs one REST call of a delivery with the channel's retries (`delivery.maxAttempts`). */
type Attempt = <T>(what: string, call: () => Promise<T>) => Promise<T>;

/**
 * A live reply on Discord (SPEC §16): `POST /channels/:id/messages`, then `PATCH` of that message with the
 * whole text again (Discord renders the markdown itself; the splitter closes and reopens what it cuts).
 * Over REST, so it works with and without shards; discord.js's REST queue waits out Discord's rate-limit
 * buckets (edits included), and the channel's retries take what Discord did not.
 */
export function discordLiveCalls(client: () => Client, attempt: Attempt): LiveReplyCalls {
  return {
    render: (message) => renderDiscord(message).filter((part) => part.trim() !== ''),
    async post(target, part, { replyTo }) {
      // In a DM the reply reference only adds noise; in a busy channel it shows what is answered.
      const reference = replyTo && target.chatType !== 'direct' ? { message_reference: { message_id: replyTo, fail_if_not_exists: false } } : {};
      const created = await attempt('createMessage', () => client().rest.post(Routes.channelMessages(target.chatId), {
        body: { content: part, allowed_mentions: { parse: [], replied_user: true }, ...reference },
      })) as { id: string };
      return created.id;
    },
    async edit(target, messageId, part) {
      await attempt('editMessage', () => client().rest.patch(Routes.channelMessage(target.chatId, messageId), {
        body: { content: part, allowed_mentions: { parse: [], replied_user: true } },
      }));
    },
  };
}
