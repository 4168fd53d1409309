import type { Attachment, ChatType, InboundMessage } from '../../src/core/message.ts';

/** A Slack file object, as far as a message listing and its download need it. */
export interface SlackFile {
  id: string;
  name?: string;
  title?: string;
  mimetype?: string;
  size?: number;
  /** Download URL; needs the bot token (`files:read`). */
  url_private?: string;
  url_private_download?: string;
  /** Images: pixels of the original. */
  original_w?: number;
  original_h?: number;
  /** Audio and video clips recorded in Slack: length in milliseconds. */
  duration_ms?: number;
  /** `slack_audio` for a clip recorded in Slack (a voice note). */
  subtype?: string;
}

/** The fields of a Slack `message` or `app_mention` event that Switchboard reads. */
export interface SlackMessageEvent {
  type: string;
  subtype?: string;
  channel?: string;
  /** `im`, `mpim`, `channel` (public) or `group` (private); absent on `app_mention`. */
  channel_type?: string;
  user?: string;
  bot_id?: string;
  text?: string;
  ts?: string;
  thread_ts?: string;
  team?: string;
  hidden?: boolean;
  edited?: unknown;
  files?: SlackFile[];
  user_profile?: { display_name?: string; real_name?: string; name?: string };
}

/** The Events API envelope around an event (`event_callback`). */
export interface SlackEnvelope {
  event_id?: string;
  team_id?: string;
  event_time?: number;
}

/** Who the bot is, from `auth.test`. */
export interface SlackBotIdentity {
  userId: string;
  botId?: string;
  teamId?: string;
}

/** Everything {@link normalizeSlackEvent} needs; the caller looks up what is not in the event. */
export interface NormalizeInput {
  event: SlackMessageEvent;
  envelope: SlackEnvelope;
  accountId: string;
  bot: SlackBotIdentity;
  /** Epoch milliseconds. */
  receivedAt: number;
  /** The sender's display name, when known (users.info). */
  senderName?: string;
  /**
   * Set when the message is in a thread the bot has answered in: such a reply counts as addressed to
   * the bot (like a reply to it). `lastReply` seeds a thread's first message with what the bot said.
   */
  botThread?: { lastReply?: string };
}

/** A message for the gateway, or why the event is not one. */
export type NormalizeResult = { kind: 'message'; message: InboundMessage } | { kind: 'ignored'; reason: string };

/** Message subtypes that carry a person's new message; every other subtype (edits, deletions, joins...) is ignored. */
const USER_SUBTYPES = new Set(['file_share', 'thread_broadcast', 'me_message']);

/**
 * Turns a Slack `message` or `app_mention` event into an {@link InboundMessage} (pure).
 *
 * - `message` in a DM (`im`) → `direct`; in channels, private channels and group DMs → `channel`.
 * - A channel message that mentions the bot is ignored here: Slack also sends it as `app_mention`,
 *   which is the one answered, so it runs once. An `app_mention` in a DM is ignored for the same reason.
 * - `thread_ts` (other than the message's own ts) → `threadId`.
 * - Edits, deletions and other subtypes, hidden events, bot messages and the bot's own messages are ignored.
 */
export function normalizeSlackEvent(input: NormalizeInput): NormalizeResult {
  const { event, envelope, bot } = input;
  const ignored = (reason: string): NormalizeResult => ({ kind: 'ignored', reason });
  // Authentic but malformed events are refused here, before any id lands in a session key.
  const malformed = malformedEvent(event);
  if (malformed) return ignored(`malformed event: ${malformed}`);
  if (event.type !== 'message' && event.type !== 'app_mention') return ignored(`event type ${event.type}`);
  if (event.subtype === 'message_changed' || event.edited !== undefined) return ignored('edit');
  if (event.subtype === 'message_deleted') return ignored('deletion');
  if (event.subtype === 'bot_message' || event.bot_id) return event.bot_id && event.bot_id === bot.botId ? ignored('own message') : ignored('bot message');
  if (event.subtype && !USER_SUBTYPES.has(event.subtype)) return ignored(`subtype ${event.subtype}`);
  if (event.hidden) return ignored('hidden');
  if (!event.user || !event.channel || !event.ts) return ignored('no user, channel or ts');
  if (event.user === bot.userId) return ignored('own message');

  const chatType = chatTypeOf(event);
  const rawText = capped(event.text ?? '');
  const mentioned = mentionsUser(rawText, bot.userId);
  if (event.type === 'message' && chatType === 'channel' && mentioned) return ignored('mention (answered as app_mention)');
  if (event.type === 'app_mention' && chatType === 'direct') return ignored('mention in a DM (answered as message.im)');

  const text = slackToPlainText(rawText, bot.userId);
  const attachments = (event.files ?? []).map(fileAttachment);
  if (!text && attachments.length === 0) return ignored('empty');

  const threadId = event.thread_ts && event.thread_ts !== event.ts ? event.thread_ts : undefined;
  const team = event.team ?? (typeof envelope.team_id === 'string' ? envelope.team_id : undefined) ?? bot.teamId;
  const profile = event.user_profile;
  const name = input.senderName ?? (text_(profile?.display_name) || text_(profile?.real_name) || undefined);
  const message: InboundMessage = {
    id: messageId(event.channel, event.ts),
    ...(typeof envelope.event_id === 'string' && envelope.event_id ? { deliveryId: envelope.event_id } : {}),
    channel: 'slack',
    accountId: input.accountId,
    chatType,
    chatId: event.channel,
    peerId: event.user,
    ...(chatType === 'channel' ? { groupId: event.channel } : {}),
    ...(team ? { containerIds: [team] } : {}),
    ...(threadId ? { threadId } : {}),
    sender: { id: event.user, ...(name ? { name } : {}), ...(text_(profile?.name) ? { username: text_(profile?.name) } : {}) },
    text,
    attachments,
    ...(threadId && input.botThread?.lastReply ? { replyTo: { id: messageId(event.channel, threadId), text: input.botThread.lastReply, fromBot: true } } : {}),
    mentionsBot: event.type === 'app_mention' || mentioned || (threadId !== undefined && input.botThread !== undefined),
    receivedAt: input.receivedAt,
    raw: event,
  };
  return { kind: 'message', message };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isOptional = (v: unknown, type: 'string' | 'boolean') => v === undefined || v === null || typeof v === type;
/** A Slack id or ts: a non-empty string without spaces or `:` (they go into keys and message ids). */
const isId = (v: unknown) => typeof v === 'string' && /^[^\s:]+$/.test(v);

/**
 * What is wrong with an event's fields that keys, ids and text are made of, or undefined when they are
 * well formed (absent ones are dealt with later). Slack never sends such events; a forged or corrupted
 * one must not yield a key ending in `undefined` nor throw.
 */
function malformedEvent(event: unknown): string | undefined {
  if (!isRecord(event)) return 'not an object';
  if (typeof event.type !== 'string') return 'no type';
  for (const field of ['user', 'channel', 'ts', 'thread_ts', 'team'] as const) {
    if (event[field] !== undefined && event[field] !== null && !isId(event[field])) return `${field} is not an id`;
  }
  for (const field of ['subtype', 'channel_type', 'bot_id', 'text'] as const) if (!isOptional(event[field], 'string')) return `${field} is not a string`;
  if (!isOptional(event.hidden, 'boolean')) return 'hidden is not a boolean';
  if (event.files !== undefined && event.files !== null && !(Array.isArray(event.files) && event.files.every((f) => isRecord(f) && isId(f.id)))) return 'files without ids';
  if (event.user_profile !== undefined && event.user_profile !== null && !isRecord(event.user_profile)) return 'user_profile is not an object';
  return undefined;
}

/** `direct` for DMs (`im`, or a `D…` channel id when the type is absent), else `channel`. */
function chatTypeOf(event: SlackMessageEvent): ChatType {
  if (event.channel_type) return event.channel_type === 'im' ? 'direct' : 'channel';
  return event.channel?.startsWith('D') ? 'direct' : 'channel';
}

/** The message id: `<channel>:<ts>` (a ts is unique within its conversation only). */
export function messageId(channel: string, ts: string): string {
  return `${channel}:${ts}`;
}

/** The ts inside a message id built by {@link messageId} (or a bare ts). */
export function tsOfMessageId(id: string | undefined): string | undefined {
  if (!id) return undefined;
  const ts = id.slice(id.lastIndexOf(':') + 1);
  return /^\d+\.\d+$/.test(ts) ? ts : undefined;
}

/**
 * Slack cuts a message's text at 40,000 characters; an event with far more is forged or broken. Its text is
 * cut here, before any markup is parsed, yet stays over the inbound size limit, which then refuses it.
 */
export const SLACK_TEXT_CAP = 200_000;

function capped(text: string): string {
  return text.length > SLACK_TEXT_CAP ? text.slice(0, SLACK_TEXT_CAP) : text;
}

/**
 * A mention's label: short, and never with a `<` (Slack escapes it as `&lt;`). Both bounds keep a text of
 * many `<@U…|` without a `>` linear to scan (with `[^>]*` it was quadratic: seconds for a megabyte).
 */
const LABEL = '(\\|[^<>]{0,256})?>';

function mentionsUser(text: string, userId: string): boolean {
  return userId !== '' && new RegExp(`<@${escapeRegExp(userId)}${LABEL}`).test(text);
}

/**
 * A file of a message as the runtime fetches it: its id, its `url_private` (the only place it is downloaded
 * from, with the bot token), and what Slack says of it. An audio clip recorded in Slack is a voice note.
 */
function fileAttachment(file: SlackFile): Attachment {
  const mimeType = text_(file.mimetype);
  const name = text_(file.name) ?? text_(file.title);
  const url = text_(file.url_private) ?? text_(file.url_private_download);
  const type: Attachment['type'] = mimeType?.startsWith('image/') ? 'image'
    : mimeType?.startsWith('audio/') ? (file.subtype === 'slack_audio' ? 'voice' : 'audio')
      : mimeType?.startsWith('video/') ? 'video'
        : 'file';
  const pixels = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n > 0;
  return {
    type,
    fileId: file.id,
    ...(url ? { url } : {}),
    ...(name ? { name } : {}),
    ...(mimeType ? { mimeType } : {}),
    ...(typeof file.size === 'number' && Number.isFinite(file.size) && file.size >= 0 ? { size: file.size } : {}),
    ...(pixels(file.original_w) && pixels(file.original_h) ? { width: file.original_w, height: file.original_h } : {}),
    ...(typeof file.duration_ms === 'number' && Number.isFinite(file.duration_ms) && file.duration_ms >= 0 ? { durationSeconds: file.duration_ms / 1000 } : {}),
  };
}

/** The value when it is a string (fields of forged events may be anything). */
function text_(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * Slack message markup → plain text: the bot's own mentions are removed (so `@bot /status` is a command),
 * other mentions become `@id` (or `@label`), channels `#name`, links `label (url)`, and `&amp;` `&lt;` `&gt;` are unescaped.
 */
export function slackToPlainText(text: string, botUserId: string): string {
  const withoutBot = botUserId ? text.replace(new RegExp(`<@${escapeRegExp(botUserId)}${LABEL}\\s*`, 'g'), '') : text;
  const converted = withoutBot.replace(/<([^<>]+)>/g, (_all, inner: string) => {
    const bar = inner.indexOf('|');
    const target = bar === -1 ? inner : inner.slice(0, bar);
    const label = bar === -1 ? undefined : inner.slice(bar + 1);
    if (target.startsWith('@')) return label ? `@${label}` : target;
    if (target.startsWith('#')) return label ? `#${label}` : target;
    if (target.startsWith('!')) {
      const special = target.slice(1).split('^')[0] ?? '';
      return label ?? `@${special}`;
    }
    if (label && label !== target && label !== target.replace(/^mailto:/, '')) return `${label} (${target})`;
    return label ?? target;
  });
  return converted.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&').trim();
}

function escapeRegExp(value: string): string {
  return value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
