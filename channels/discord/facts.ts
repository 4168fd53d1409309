import { MessageFlags, type Client, type Message } from 'discord.js';
import type { DiscordMessageFacts } from './normalize.ts';

/** Reads the facts {@link normalizeDiscordMessage} needs off a discord.js message (no network calls). */
export function factsOf(message: Message): DiscordMessageFacts {
  const channel = message.channel;
  const referenceId = message.reference?.messageId;
  const referenced = referenceId ? message.channel.messages.cache.get(referenceId) : undefined;
  const repliedUserId = message.mentions.repliedUser?.id ?? referenced?.author.id;
  return {
    id: message.id,
    channelId: message.channelId,
    channelType: channel.type,
    parentId: channel.isThread() ? channel.parentId : null,
    guildId: message.guildId,
    author: {
      id: message.author.id,
      username: message.author.username,
      globalName: message.author.globalName,
      bot: message.author.bot,
    },
    memberName: message.member?.nickname ?? null,
    content: message.content,
    system: message.system,
    webhookId: message.webhookId,
    mentionedUsers: [...message.mentions.users.values()].map((u) => ({ id: u.id, name: u.globalName ?? u.username })),
    mentionedRoleIds: [...message.mentions.roles.keys()],
    ...(referenceId ? { reference: { messageId: referenceId, authorId: repliedUserId ?? null, content: referenced?.content ?? null } } : {}),
    voiceMessage: message.flags.has(MessageFlags.IsVoiceMessage),
    attachments: [...message.attachments.values()].map((a) => ({
      id: a.id, url: a.url, name: a.name, size: a.size, contentType: a.contentType, width: a.width, height: a.height, durationSeconds: a.duration,
    })),
  };
}

/** The bot's managed role in the message's guild, if Discord created one for it. */
export function botRoleIdsOf(client: Client, message: Message): string[] {
  const user = client.user;
  if (!user || !message.guild) return [];
  const role = message.guild.roles.botRoleFor(user);
  return role ? [role.id] : [];
}
