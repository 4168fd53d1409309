import type { Api } from 'grammy';
import type { ReactionTypeEmoji } from 'grammy/types';
import { ChannelError } from '../../src/core/errors.ts';
import type { DeliveryTarget } from '../../src/core/message.ts';
import { telegramMessageId } from './normalize.ts';

/** The reaction is not one Telegram could take (no message id, an empty emoji). */
export class TelegramReactionError extends ChannelError {
  constructor(detail: string) {
    super('TELEGRAM_REACTION_INVALID', detail);
  }
}

/**
 * An emoji as Telegram's reaction list writes it: without the variation selector (`❤️` → `❤`). Telegram takes
 * only its fixed set (👀, 👍, 🔥, …; see `ReactionTypeEmoji`); others are refused with a 400, which is not retried.
 */
export function telegramReactionEmoji(emoji: string): string {
  return emoji.replace(/\uFE0F/g, '').trim();
}

/** Puts `emoji` on a received message (`setMessageReaction`, replacing the bot's own earlier reaction there). */
export async function reactTo(api: Api, target: DeliveryTarget, messageId: string, emoji: string): Promise<void> {
  const id = telegramMessageId(messageId);
  const reaction = telegramReactionEmoji(emoji);
  if (!id) throw new TelegramReactionError(`"${messageId}" is not a Telegram message id.`);
  if (!reaction) throw new TelegramReactionError('An empty reaction cannot be set.');
  const chatId = /^-?\d{1,16}$/.test(target.chatId) ? Number(target.chatId) : target.chatId;
  await api.setMessageReaction(chatId, id, [{ type: 'emoji', emoji: reaction as ReactionTypeEmoji['emoji'] }]);
}
