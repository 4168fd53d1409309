import { GrammyError, InputFile, type Api } from 'grammy';
import type { OutboundFile } from '../../src/core/message.ts';

/** The message the first message of a reply answers (groups only); cleared once something was sent. */
export interface ReplyState {
  replyTo: number | undefined;
}

/** Where a reply goes: the chat and its forum topic. */
export interface TelegramPlace {
  chatId: number | string;
  thread: { message_thread_id?: number };
}

/** Telegram's limit on a photo or document caption, in characters. */
export const TELEGRAM_CAPTION_LIMIT = 1024;

/** Photos uploaded as photos must be under 10 MB (Bot API `sendPhoto`); larger images go as documents. */
export const TELEGRAM_PHOTO_LIMIT = 10 * 1024 * 1024;

/** Image types `sendPhoto` takes as a photo. */
const PHOTO_MIMES = new Set(['image/jpeg', 'image/jpg', 'image/png', 'image/webp']);

/** `reply_parameters` for the first message of a reply. */
export function replyParameters(state: ReplyState): { reply_parameters?: { message_id: number; allow_sending_without_reply: true } } {
  return state.replyTo ? { reply_parameters: { message_id: state.replyTo, allow_sending_without_reply: true } } : {};
}

/** A caption from an image's alt text: only when it fits Telegram's caption limit. */
function captionOf(alt: string): { caption?: string } {
  const text = alt.trim();
  return text && text.length <= TELEGRAM_CAPTION_LIMIT ? { caption: text } : {};
}

/** An image that could not go as a photo, as markdown text with its link. */
export function imageAsLink(image: { url: string; alt: string }): string {
  return image.alt ? `${image.alt}: ${image.url}` : image.url;
}

/**
 * Sends an image of an answer as a photo by its URL (Telegram fetches it), its alt text as the caption.
 * Resolves false when Telegram refused the URL (a 400: it could not fetch it, or it is not an image): the
 * caller sends a link instead. Other failures (after the API transformer's retries) are thrown.
 */
export async function sendImage(api: Api, where: TelegramPlace, image: { url: string; alt: string }, state: ReplyState): Promise<boolean> {
  try {
    await api.sendPhoto(where.chatId, image.url, { ...where.thread, ...replyParameters(state), ...captionOf(image.alt) });
  } catch (error) {
    if (error instanceof GrammyError && error.error_code === 400) return false;
    throw error;
  }
  state.replyTo = undefined;
  return true;
}

/**
 * Uploads a file of the reply natively: an image Telegram shows as a photo (JPEG, PNG, WebP under 10 MB)
 * with `sendPhoto`, falling back to `sendDocument` when Telegram refuses it as a photo (dimensions, type);
 * anything else with `sendDocument`, under its name. The file is read from its path at each attempt, so the
 * API transformer's retries send it whole again.
 */
export async function sendFile(api: Api, where: TelegramPlace, file: OutboundFile, state: ReplyState): Promise<void> {
  const options = { ...where.thread, ...replyParameters(state) };
  if (PHOTO_MIMES.has(file.mime.toLowerCase()) && file.size < TELEGRAM_PHOTO_LIMIT) {
    try {
      await api.sendPhoto(where.chatId, new InputFile(file.path, file.name), options);
      state.replyTo = undefined;
      return;
    } catch (error) {
      if (!(error instanceof GrammyError && error.error_code === 400)) throw error;
    }
  }
  await api.sendDocument(where.chatId, new InputFile(file.path, file.name), options);
  state.replyTo = undefined;
}
