import { ChannelType } from 'discord.js';
import type { Attachment, InboundMessage } from '../../src/core/message.ts';

/**
 * The facts of one Discord message that Switchboard uses, read off the discord.js `Message` by
 * `facts.ts`. Plain data, so normalizing is a pure function that tests can feed directly.
 */
export interface DiscordMessageFacts {
  id: string;
  /** The channel the message was posted in (the thread itself for thread messages). */
  channelId: string;
  channelType: ChannelType;
  /** For threads: the channel the thread belongs to. */
  parentId?: string | null;
  guildId?: string | null;
  author: { id: string; username: string; globalName?: string | null; bot: boolean };
  /** The author's server nickname, when there is one. */
  memberName?: string | null;
  content: string;
  /** System messages (joins, pins, thread created, ...) are never chat input. */
  system?: boolean;
  webhookId?: string | null;
  /** Users in `mentions` (a reply that pings its author lists that author too), with their names. */
  mentionedUsers: { id: string; name: string }[];
  mentionedRoleIds: string[];
  /** The message this one replies to. */
  reference?: { messageId: string; authorId?: string | null; content?: string | null };
  /** The message is a voice message (flag IS_VOICE_MESSAGE): its audio attachment is a voice note. */
  voiceMessage?: boolean;
  attachments: {
    id: string; url: string; name?: string | null; size?: number | null; contentType?: string | null;
    width?: number | null; height?: number | null; durationSeconds?: number | null;
  }[];
}

/** Who the bot is, where the message arrived. */
export interface DiscordBotContext {
  accountId: string;
  botUserId: string;
  /** The bot's managed role in the message's guild (mentioning it addresses the bot). */
  botRoleIds: readonly string[];
  /** Epoch milliseconds of receipt. */
  receivedAt: number;
}

/** Why a message is not handed to the gateway. */
export type NormalizeResult =
  | { kind: 'message'; message: InboundMessage }
  | { kind: 'ignored'; reason: string };

const DIRECT_TYPES = new Set<ChannelType>([ChannelType.DM]);
const THREAD_TYPES = new Set<ChannelType>([ChannelType.PublicThread, ChannelType.PrivateThread, ChannelType.AnnouncementThread]);
const CHANNEL_TYPES = new Set<ChannelType>([
  ChannelType.GuildText, ChannelType.GuildAnnouncement, ChannelType.GuildVoice, ChannelType.GuildStageVoice,
]);

/**
 * Turns a Discord message into an {@link InboundMessage} (SPEC §2, §10): a DM is `direct` (peer = the
 * author); a guild text channel is `channel` with the channel as group and the guild as container; a
 * thread is `channel` with its parent as group and its own id as thread (replies go to the thread).
 */
export function normalizeDiscordMessage(facts: DiscordMessageFacts, bot: DiscordBotContext): NormalizeResult {
  if (facts.author.id === bot.botUserId) return { kind: 'ignored', reason: 'own message' };
  if (facts.author.bot || facts.webhookId) return { kind: 'ignored', reason: 'message from a bot or webhook' };
  if (facts.system) return { kind: 'ignored', reason: 'system message' };
  const place = placeOf(facts);
  if (!place) return { kind: 'ignored', reason: `unsupported channel type ${facts.channelType}` };

  const mentioned = mentionsBot(facts, bot);
  const text = cleanText(facts.content, bot, facts.mentionedUsers);
  const attachments = facts.attachments.map((a) => toAttachment(a, facts.voiceMessage === true));
  if (!text && attachments.length === 0) return { kind: 'ignored', reason: 'empty message' };

  const name = facts.memberName || facts.author.globalName || facts.author.username;
  const message: InboundMessage = {
    id: facts.id,
    channel: 'discord',
    accountId: bot.accountId,
    chatId: facts.channelId,
    peerId: facts.author.id,
    ...place,
    sender: { id: facts.author.id, name, username: facts.author.username, isBot: false },
    text,
    attachments,
    mentionsBot: mentioned,
    receivedAt: bot.receivedAt,
  };
  if (facts.reference) {
    message.replyTo = {
      id: facts.reference.messageId,
      ...(facts.reference.content ? { text: facts.reference.content } : {}),
      fromBot: facts.reference.authorId === bot.botUserId,
    };
  }
  return { kind: 'message', message };
}

type Place = Pick<InboundMessage, 'chatType' | 'groupId' | 'containerIds' | 'threadId' | 'threadKind'>;

function placeOf(facts: DiscordMessageFacts): Place | undefined {
  if (DIRECT_TYPES.has(facts.channelType)) return { chatType: 'direct' };
  if (!facts.guildId) return undefined;
  const containerIds = [facts.guildId];
  if (THREAD_TYPES.has(facts.channelType)) {
    // A thread whose parent is unknown still gets answered, as a channel of its own.
    if (!facts.parentId) return { chatType: 'channel', groupId: facts.channelId, containerIds };
    return { chatType: 'channel', groupId: facts.parentId, containerIds, threadId: facts.channelId, threadKind: 'thread' };
  }
  if (CHANNEL_TYPES.has(facts.channelType)) return { chatType: 'channel', groupId: facts.channelId, containerIds };
  return undefined;
}

const USER_MENTION = /<@!?(\d+)>/g;
const ROLE_MENTION = /<@&(\d+)>/g;

/** True when the bot's user or managed role is mentioned, or the message replies to the bot. */
export function mentionsBot(facts: DiscordMessageFacts, bot: Pick<DiscordBotContext, 'botUserId' | 'botRoleIds'>): boolean {
  if (facts.reference?.authorId === bot.botUserId) return true;
  if (facts.mentionedUsers.some((u) => u.id === bot.botUserId)) return true;
  if (facts.mentionedRoleIds.some((id) => bot.botRoleIds.includes(id))) return true;
  for (const m of facts.content.matchAll(USER_MENTION)) if (m[1] === bot.botUserId) return true;
  for (const m of facts.content.matchAll(ROLE_MENTION)) if (m[1] !== undefined && bot.botRoleIds.includes(m[1])) return true;
  return false;
}

/**
 * The text the agent sees: the bot's own user and role mentions removed, other user mentions shown as
 * `@name` (the model cannot read `<@123>`), whitespace left by the removal tidied.
 */
export function cleanText(content: string, bot: Pick<DiscordBotContext, 'botUserId' | 'botRoleIds'>, users: readonly { id: string; name: string }[] = []): string {
  const names = new Map(users.map((u) => [u.id, u.name]));
  const isBot = (kind: string, id: string) => (kind === '&' ? bot.botRoleIds.includes(id) : id === bot.botUserId);
  // `<@bot>, hello` → `hello`; `hi <@bot> there` → `hi there`; indentation elsewhere is left alone.
  return content
    .replace(/^(?:\s*<@(!|&)?(\d+)>[ \t]*[,:]?)+[ \t]*/, (whole) => (ownMentionsOnly(whole, isBot) ? '' : whole))
    .replace(/[ \t]?<@(!|&)?(\d+)>/g, (whole, kind: string | undefined, id: string) => {
      if (isBot(kind ?? '', id)) return '';
      const name = kind === '&' ? undefined : names.get(id);
      return name ? whole.replace(/<@!?\d+>/, `@${name}`) : whole;
    })
    .trim();
}

function ownMentionsOnly(prefix: string, isBot: (kind: string, id: string) => boolean): boolean {
  return [...prefix.matchAll(/<@(!|&)?(\d+)>/g)].every((m) => isBot(m[1] ?? '', m[2] ?? ''));
}

/**
 * One attachment as the runtime fetches it: its id, Discord's CDN URL (the only place it is downloaded from),
 * and what Discord says of it (type from its content type, pixels, a voice message's duration).
 */
function toAttachment(a: DiscordMessageFacts['attachments'][number], voiceMessage: boolean): Attachment {
  const mime = a.contentType ?? undefined;
  const type: Attachment['type'] = voiceMessage && (!mime || mime.startsWith('audio/')) ? 'voice'
    : mime?.startsWith('image/') ? 'image'
      : mime?.startsWith('video/') ? 'video'
        : mime?.startsWith('audio/') ? 'audio'
          : 'file';
  const positive = (n: number | null | undefined): n is number => typeof n === 'number' && Number.isFinite(n) && n > 0;
  return {
    type,
    fileId: a.id,
    ...(a.url ? { url: a.url } : {}),
    ...(a.name ? { name: a.name } : {}),
    ...(mime ? { mimeType: mime } : {}),
    ...(typeof a.size === 'number' ? { size: a.size } : {}),
    ...(positive(a.width) && positive(a.height) ? { width: a.width, height: a.height } : {}),
    ...(typeof a.durationSeconds === 'number' && Number.isFinite(a.durationSeconds) && a.durationSeconds >= 0 ? { durationSeconds: a.durationSeconds } : {}),
  };
}
