import { GrammyError, type Api } from 'grammy';
import type { LiveReplyCalls } from '../../src/core/channel-adapter.ts';
import type { DeliveryTarget } from '../../src/core/message.ts';
import { chatIdOf, isParseError, threadOf } from './deliver.ts';
import { telegramMessageId } from './normalize.ts';
import { renderOutbound } from './render.ts';
import { htmlToReadableText } from './split-html.ts';

/** Telegram's answer to an edit that changes nothing: the message already shows that text. */
export function isNotModified(error: unknown): boolean {
  return error instanceof GrammyError && error.error_code === 400 && /message is not modified/i.test(error.description);
}

/**
 * A live reply on Telegram (SPEC §16): `sendMessage`, then `editMessageText` with the whole text rendered
 * again, HTML every time (the renderer closes what it opens, whatever prefix of markdown it is given); what
 * Telegram cannot parse goes as plain text, as ordinary replies do. Retries (a 429's `retry_after`, 5xx, a
 * reset connection) are the API transformer's, as for every delivery.
 */
export function telegramLiveCalls(api: () => Api): LiveReplyCalls {
  return {
    render: (message) => renderOutbound(message).filter((part) => htmlToReadableText(part).trim() !== ''),

    async post(target, part, { replyTo, threadId }) {
      // In groups the first part replies to the message it answers, as ordinary replies do.
      const reply = target.chatType === 'direct' ? undefined : telegramMessageId(replyTo);
      const options = {
        ...threadOf(target, threadId ? { text: '', threadId } : undefined),
        ...(reply ? { reply_parameters: { message_id: reply, allow_sending_without_reply: true } } : {}),
      };
      try {
        return String((await api().sendMessage(chatIdOf(target), part, { ...options, parse_mode: 'HTML' })).message_id);
      } catch (error) {
        if (!isParseError(error)) throw error;
        return String((await api().sendMessage(chatIdOf(target), htmlToReadableText(part), options)).message_id);
      }
    },

    async edit(target: DeliveryTarget, messageId: string, part: string) {
      const id = Number(messageId);
      try {
        await api().editMessageText(chatIdOf(target), id, part, { parse_mode: 'HTML' });
      } catch (error) {
        if (isNotModified(error)) return;
        if (!isParseError(error)) throw error;
        await api().editMessageText(chatIdOf(target), id, htmlToReadableText(part)).catch((plain: unknown) => {
          if (!isNotModified(plain)) throw plain;
        });
      }
    },
  };
}
