import { GrammyError, type Api } from 'grammy';
import type { DeliveryTarget, OutboundMessage } from '../../src/core/message.ts';
import { telegramMessageId } from './normalize.ts';
import { renderOutbound } from './render.ts';
import { htmlToPlainText } from './split-html.ts';

/** True for Telegram's answer to HTML it cannot read ("Bad Request: can't parse entities: ..."). */
export function isParseError(error: unknown): boolean {
  return error instanceof GrammyError && error.error_code === 400 && /can't parse entities|unsupported start tag|can't find end tag/i.test(error.description);
}

/** Telegram chat ids are numbers (at most 52 bits); anything else (a `@channelusername`) passes as is. */
function chatIdOf(target: DeliveryTarget): number | string {
  return /^-?\d{1,16}$/.test(target.chatId) ? Number(target.chatId) : target.chatId;
}

function threadOf(target: DeliveryTarget, message?: OutboundMessage): { message_thread_id?: number } {
  const thread = Number(message?.threadId ?? target.threadId);
  return Number.isSafeInteger(thread) && thread > 0 ? { message_thread_id: thread } : {};
}

/**
 * Sends one outbound message: rendered to Telegram HTML, split at 4096 characters, into the same forum
 * topic. In groups the first part replies to the message it answers (so it is clear whom the bot
 * answers). A part Telegram cannot parse is sent again as plain text.
 */
export async function deliverMessage(api: Api, target: DeliveryTarget, message: OutboundMessage): Promise<void> {
  const chunks = renderOutbound(message);
  const thread = threadOf(target, message);
  const replyTo = target.chatType === 'direct' ? undefined : telegramMessageId(message.replyTo ?? target.replyToId);
  for (const [index, html] of chunks.entries()) {
    const common = {
      ...thread,
      ...(index === 0 && replyTo ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } } : {}),
    };
    try {
      await api.sendMessage(chatIdOf(target), html, { ...common, parse_mode: 'HTML' });
    } catch (error) {
      if (!isParseError(error)) throw error;
      await api.sendMessage(chatIdOf(target), htmlToPlainText(html), common);
    }
  }
}

/** Shows "typing…" in the chat (in the right topic) for about 5 seconds. */
export async function sendTyping(api: Api, target: DeliveryTarget): Promise<void> {
  await api.sendChatAction(chatIdOf(target), 'typing', threadOf(target));
}

/**
 * The chat commands as Telegram accepts them: names of 1–32 lowercase letters, digits or `_`,
 * descriptions of 1–256 characters, at most 100, no duplicates.
 */
export function telegramCommands(commands: readonly { command: string; description: string }[]): { command: string; description: string }[] {
  const seen = new Set<string>();
  const out: { command: string; description: string }[] = [];
  for (const c of commands) {
    const command = c.command.replace(/^\//, '').toLowerCase();
    if (!/^[a-z0-9_]{1,32}$/.test(command) || seen.has(command)) continue;
    seen.add(command);
    out.push({ command, description: (c.description.trim() || command).slice(0, 256) });
    if (out.length === 100) break;
  }
  return out;
}
