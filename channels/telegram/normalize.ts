import type { Message, MessageEntity, Update } from 'grammy/types';
import type { Attachment, InboundMessage, Sender } from '../../src/core/message.ts';

/** Who the bot is and when the update arrived: everything {@link normalizeUpdate} needs besides the update. */
export interface NormalizeContext {
  accountId: string;
  bot: { id: number; username: string };
  /** Epoch milliseconds of receipt. */
  now: number;
  correlationId?: string;
}

/** An update either becomes a message for the gateway or is ignored, with the reason (for debug logs). */
export type NormalizeResult = { message: InboundMessage } | { ignored: string };

/**
 * Turns one Telegram update into an {@link InboundMessage}. Pure.
 *
 * Only new messages are handled. Edited messages are ignored (answering an edit would answer the same
 * question twice), as are channel posts (broadcast channels have no conversation), the bot's own
 * messages, service messages with no text or media, and commands addressed to another bot.
 */
export function normalizeUpdate(update: Update, context: NormalizeContext): NormalizeResult {
  if (update.edited_message || update.edited_channel_post) return { ignored: 'edited message' };
  if (update.channel_post) return { ignored: 'channel post' };
  const message = update.message;
  if (!message) return { ignored: `unsupported update (${Object.keys(update).filter((k) => k !== 'update_id').join(', ') || 'empty'})` };
  // Authentic but malformed updates are refused here, before any id lands in a session key.
  const malformed = malformedMessage(message);
  if (malformed) return { ignored: `malformed message: ${malformed}` };
  const { chat } = message;
  if (message.from?.id === context.bot.id) return { ignored: "the bot's own message" };

  const text = message.text ?? message.caption ?? '';
  const entities = (message.entities ?? message.caption_entities ?? []).filter(isEntity);
  const attachments = attachmentsOf(message);
  if (!text.trim() && attachments.length === 0) return { ignored: 'service message without text or media' };

  const direct = chat.type === 'private';
  const command = leadingCommand(text, entities);
  if (!direct && command?.target && command.target.toLowerCase() !== context.bot.username.toLowerCase()) {
    return { ignored: `command for another bot (@${command.target})` };
  }
  const sender = senderOf(message);
  const chatId = String(chat.id);
  const replied = repliedMessage(message);
  const replyToBot = replied?.from?.id === context.bot.id;
  const threadId = message.is_topic_message && Number.isSafeInteger(message.message_thread_id) ? String(message.message_thread_id) : undefined;

  const inbound: InboundMessage = {
    id: messageKey(chat.id, message.message_id),
    ...(Number.isSafeInteger(update.update_id) ? { deliveryId: String(update.update_id) } : {}),
    channel: 'telegram',
    accountId: context.accountId,
    chatType: direct ? 'direct' : 'group',
    chatId,
    peerId: sender.id,
    ...(direct ? {} : { groupId: chatId }),
    ...(threadId ? { threadId, threadKind: 'topic' as const } : {}),
    sender,
    text,
    attachments,
    ...(replied ? { replyTo: { id: messageKey(chat.id, replied.message_id), text: stringOr(replied.text) ?? stringOr(replied.caption), fromBot: replyToBot } } : {}),
    mentionsBot: replyToBot || mentions(text, entities, context.bot) || (command !== undefined && (command.target !== undefined || direct)),
    receivedAt: context.now,
    ...(context.correlationId ? { correlationId: context.correlationId } : {}),
    raw: update,
  };
  return { message: inbound };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
/** A Telegram id: an integer (chat ids of supergroups are negative). */
const isId = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);
const isOptional = (v: unknown, check: (x: unknown) => boolean) => v === undefined || v === null || check(v);
const isString = (v: unknown) => typeof v === 'string';
const stringOr = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * What is wrong with a message whose fields the key and the reply need (chat id and type, message id,
 * sender id, text), or undefined when it is well formed. Telegram never sends such updates; a forged or
 * corrupted one must not yield a session key ending in `undefined`.
 */
function malformedMessage(message: unknown): string | undefined {
  if (!isRecord(message)) return 'not an object';
  const chat = message.chat;
  if (!isRecord(chat) || !isId(chat.id)) return 'no chat id';
  if (!isString(chat.type)) return 'no chat type';
  if (!isId(message.message_id)) return 'no message id';
  if (!isOptional(message.from, (f) => isRecord(f) && isId(f.id))) return 'a sender without an id';
  if (!isOptional(message.sender_chat, (c) => isRecord(c) && isId(c.id))) return 'a sender chat without an id';
  if (!isOptional(message.text, isString) || !isOptional(message.caption, isString)) return 'text that is not a string';
  if (!isOptional(message.entities, Array.isArray) || !isOptional(message.caption_entities, Array.isArray)) return 'entities that are not a list';
  if (!isOptional(message.reply_to_message, (r) => isRecord(r) && isId(r.message_id))) return 'a reply to a message without an id';
  for (const field of ['photo'] as const) if (!isOptional(message[field], (list) => Array.isArray(list) && list.every((p) => isRecord(p) && isString(p.file_id)))) return `${field} without file ids`;
  for (const field of ['animation', 'document', 'voice', 'audio', 'video', 'video_note', 'sticker'] as const) {
    if (!isOptional(message[field], (a) => isRecord(a) && isString(a.file_id))) return `${field} without a file id`;
  }
  return undefined;
}

function isEntity(e: unknown): e is MessageEntity {
  return isRecord(e) && isString(e.type) && Number.isSafeInteger(e.offset) && Number.isSafeInteger(e.length)
    && (e.type !== 'text_mention' || (isRecord(e.user) && isId(e.user.id)));
}

/** `InboundMessage.id` of a Telegram message: message ids are unique per chat only. */
export function messageKey(chatId: number | string, messageId: number): string {
  return `${chatId}:${messageId}`;
}

/** The Telegram message id inside a {@link messageKey} (or a bare id), if it is one. */
export function telegramMessageId(key: string | undefined): number | undefined {
  if (!key) return undefined;
  const id = Number(key.slice(key.lastIndexOf(':') + 1));
  return Number.isSafeInteger(id) && id > 0 ? id : undefined;
}

function senderOf(message: Message): Sender {
  // Anonymous group admins and linked channels post "as the chat"; `from` is then a placeholder bot.
  if (message.sender_chat) {
    const title = 'title' in message.sender_chat ? stringOr(message.sender_chat.title) : undefined;
    return { id: String(message.sender_chat.id), ...(title ? { name: title } : {}), isBot: false };
  }
  const from = message.from;
  if (!from) return { id: String(message.chat.id) };
  const name = [stringOr(from.first_name), stringOr(from.last_name)].filter(Boolean).join(' ');
  const username = stringOr(from.username);
  return { id: String(from.id), ...(name ? { name } : {}), ...(username ? { username } : {}), isBot: from.is_bot === true };
}

/**
 * The message this one replies to. Inside a forum topic Telegram sets `reply_to_message` to the topic's
 * opening service message on every plain message; that is not a reply.
 */
function repliedMessage(message: Message): Message['reply_to_message'] {
  const replied = message.reply_to_message;
  if (!replied) return undefined;
  if (replied.forum_topic_created || (message.is_topic_message && replied.message_id === message.message_thread_id)) return undefined;
  return replied;
}

function mentions(text: string, entities: readonly MessageEntity[], bot: NormalizeContext['bot']): boolean {
  const handle = `@${bot.username}`.toLowerCase();
  if (entities.length === 0) return new RegExp(`(^|[^\\w@])${escapeRegExp(handle)}(?![\\w])`, 'i').test(text);
  return entities.some((e) =>
    (e.type === 'mention' && text.slice(e.offset, e.offset + e.length).toLowerCase() === handle) ||
    (e.type === 'text_mention' && e.user.id === bot.id));
}

/** A command at the very start of the text: `/name` or `/name@target`. */
function leadingCommand(text: string, entities: readonly MessageEntity[]): { name: string; target?: string } | undefined {
  const entity = entities.find((e) => e.type === 'bot_command' && e.offset === 0);
  const raw = entity ? text.slice(0, entity.length) : entities.length === 0 ? /^\/[A-Za-z0-9_]+(?:@[A-Za-z0-9_]+)?(?=\s|$)/.exec(text)?.[0] : undefined;
  if (!raw) return undefined;
  const [name = '', target] = raw.slice(1).split('@');
  return target ? { name, target } : { name };
}

function attachmentsOf(message: Message): Attachment[] {
  const out: Attachment[] = [];
  const largest = message.photo?.at(-1);
  // Telegram stores photos as JPEG (it re-encodes what it is sent).
  if (largest) out.push({ type: 'photo', fileId: largest.file_id, mimeType: 'image/jpeg', ...size(largest.file_size), ...dimensions(largest) });
  if (message.animation) {
    const a = message.animation;
    out.push({ type: 'video', fileId: a.file_id, ...opt('name', a.file_name), ...opt('mimeType', a.mime_type), ...size(a.file_size), ...duration(a.duration), ...dimensions(a) });
  } else if (message.document) {
    // An animation also carries `document` for old clients: listed once, above.
    const d = message.document;
    out.push({ type: 'document', fileId: d.file_id, ...opt('name', d.file_name), ...opt('mimeType', d.mime_type), ...size(d.file_size) });
  }
  if (message.voice) {
    const v = message.voice;
    out.push({ type: 'voice', fileId: v.file_id, ...opt('mimeType', v.mime_type), ...size(v.file_size), ...duration(v.duration) });
  }
  if (message.audio) {
    const a = message.audio;
    out.push({ type: 'audio', fileId: a.file_id, ...opt('name', a.file_name ?? a.title), ...opt('mimeType', a.mime_type), ...size(a.file_size), ...duration(a.duration) });
  }
  if (message.video) {
    const v = message.video;
    out.push({ type: 'video', fileId: v.file_id, ...opt('name', v.file_name), ...opt('mimeType', v.mime_type), ...size(v.file_size), ...duration(v.duration), ...dimensions(v) });
  }
  if (message.video_note) {
    // A round video: square, `length` pixels a side; Telegram records them as MP4.
    const n = message.video_note;
    out.push({ type: 'video', fileId: n.file_id, mimeType: 'video/mp4', ...size(n.file_size), ...duration(n.duration), ...dimensions({ width: n.length, height: n.length }) });
  }
  if (message.sticker) {
    const s = message.sticker;
    const mime = s.is_animated ? 'application/x-tgsticker' : s.is_video ? 'video/webm' : 'image/webp';
    out.push({ type: 'sticker', fileId: s.file_id, ...opt('name', s.emoji), mimeType: mime, ...size(s.file_size), ...dimensions(s) });
  }
  return out;
}

/** Seconds, when Telegram gave a sane number. */
function duration(seconds: unknown): { durationSeconds?: number } {
  return typeof seconds === 'number' && Number.isFinite(seconds) && seconds >= 0 ? { durationSeconds: seconds } : {};
}

/** Width and height, when both are positive integers. */
function dimensions(media: { width?: unknown; height?: unknown }): { width?: number; height?: number } {
  const ok = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v > 0;
  return ok(media.width) && ok(media.height) ? { width: media.width, height: media.height } : {};
}

function size(bytes: number | undefined): { size?: number } {
  return typeof bytes === 'number' && Number.isFinite(bytes) && bytes >= 0 ? { size: bytes } : {};
}

function opt<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value ? ({ [key]: value } as Record<K, string>) : {};
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
