import { GrammyError, type Api } from 'grammy';
import { ChannelError } from '../../src/core/errors.ts';
import { splitImageLines } from '../../src/core/markdown-images.ts';
import { outboundText, type DeliveryTarget, type OutboundMessage } from '../../src/core/message.ts';
import { splitMarkup, textAtoms } from '../../src/core/text-split.ts';
import { telegramMessageId } from './normalize.ts';
import { renderOutbound } from './render.ts';
import { plural } from '../../src/core/plural.ts';
import { htmlToReadableText, splitHtml, TELEGRAM_TEXT_LIMIT } from './split-html.ts';
import { imageAsLink, replyParameters, sendFile, sendImage, type ReplyState } from './send-media.ts';

/** True for Telegram's "Bad Request" answers, which are about the message sent (too long, unreadable, ...). */
function isBadRequest(error: unknown): error is GrammyError {
  return error instanceof GrammyError && error.error_code === 400;
}

/** True for Telegram's answer to HTML it cannot read ("Bad Request: can't parse entities: ..."). */
export function isParseError(error: unknown): boolean {
  return error instanceof GrammyError && error.error_code === 400 && /can't parse entities|unsupported start tag|can't find end tag/i.test(error.description);
}

/** True for a refusal about the message's size or its entities ("message is too long", "too many entities"). */
function isSizeError(error: GrammyError): boolean {
  return /too long|entit/i.test(error.description);
}

/** Telegram chat ids are numbers (at most 52 bits); anything else (a `@channelusername`) passes as is. */
export function chatIdOf(target: DeliveryTarget): number | string {
  return /^-?\d{1,16}$/.test(target.chatId) ? Number(target.chatId) : target.chatId;
}

export function threadOf(target: DeliveryTarget, message?: OutboundMessage): { message_thread_id?: number } {
  const thread = Number(message?.threadId ?? target.threadId);
  return Number.isSafeInteger(thread) && thread > 0 ? { message_thread_id: thread } : {};
}

/** Below this (a quarter of a message) a refused part is not split again but sent as plain text. */
const SMALLEST_RESPLIT = TELEGRAM_TEXT_LIMIT / 4;

/**
 * Sends one outbound message: rendered to Telegram HTML, split at 4096 characters, into the same forum
 * topic. In groups the first part replies to the message it answers (so it is clear whom the bot
 * answers). A part Telegram refuses with a 400 is split in smaller parts and sent again (down to a
 * quarter of a message); what still fails, or cannot be parsed, is sent as plain text. A part that fails
 * even then does not stop the rest of the reply; the failures are thrown together at the end. A markdown
 * image alone on its line is sent as a photo by its URL, in order with the text around it (a URL Telegram
 * cannot fetch is sent as a link instead); the message's `files` are uploaded after the text.
 */
export async function deliverMessage(api: Api, target: DeliveryTarget, message: OutboundMessage): Promise<void> {
  const state: ReplyState = { replyTo: target.chatType === 'direct' ? undefined : telegramMessageId(message.replyTo ?? target.replyToId) };
  const where = { chatId: chatIdOf(target), thread: threadOf(target, message) };
  const parts = splitImageLines(outboundText(message));
  if (!parts.some((part) => part.kind === 'image')) await deliverText(api, target, message, state);
  else {
    // Images alone on their line go as photos, in order with the text around them (SPEC §15).
    for (const part of parts) {
      if (part.kind === 'text') await deliverText(api, target, { ...message, notice: undefined, text: part.text }, state);
      else if (!(await sendImage(api, where, part, state))) await deliverText(api, target, { ...message, notice: undefined, text: imageAsLink(part) }, state);
    }
  }
  for (const file of message.files ?? []) await sendFile(api, where, file, state);
}

/** Renders and sends the text of one message (all of it, or one text part of it); see {@link deliverMessage}. */
async function deliverText(api: Api, target: DeliveryTarget, message: OutboundMessage, state: ReplyState): Promise<void> {
  const chatId = chatIdOf(target);
  const thread = threadOf(target, message);
  const failures: GrammyError[] = [];

  const send = async (text: string, html: boolean) => {
    await api.sendMessage(chatId, text, {
      ...thread,
      ...replyParameters(state),
      ...(html ? { parse_mode: 'HTML' as const } : {}),
    });
    state.replyTo = undefined;
  };
  const sendPlain = async (html: string) => {
    for (const text of splitMarkup(textAtoms(htmlToReadableText(html)), TELEGRAM_TEXT_LIMIT)) {
      try {
        await send(text, false);
      } catch (error) {
        if (!isBadRequest(error)) throw error;
        failures.push(error);
      }
    }
  };
  const sendHtml = async (html: string, limit: number): Promise<void> => {
    try {
      return await send(html, true);
    } catch (error) {
      if (!isBadRequest(error)) throw error;
      // Splitting cannot mend markup Telegram cannot read. Any other refusal of a whole message is tried
      // once in smaller parts; a part is split further only when it is refused for its size or its
      // entities, so that a refusal of the chat itself ("not enough rights") costs a few sends, not hundreds.
      if (!isParseError(error) && (limit === TELEGRAM_TEXT_LIMIT || isSizeError(error))) {
        for (let smaller = limit / 2; smaller >= SMALLEST_RESPLIT; smaller /= 2) {
          const parts = splitHtml(html, smaller);
          if (parts.length < 2) continue;
          for (const part of parts) await sendHtml(part, smaller);
          return;
        }
      }
    }
    await sendPlain(html);
  };

  for (const html of renderOutbound(message)) await sendHtml(html, TELEGRAM_TEXT_LIMIT);
  if (failures.length) {
    const reasons = [...new Set(failures.map((f) => f.description))].join('; ');
    throw new ChannelError('TELEGRAM_SEND_FAILED', `Telegram refused ${plural(failures.length, 'part')} of a reply to ${target.chatId} even as plain text (${reasons}).`, failures[0]);
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
