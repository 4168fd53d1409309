import { ChannelType } from 'discord.js';
import { describe, expect, it } from 'vitest';
import { cleanText, normalizeDiscordMessage, type DiscordMessageFacts } from '../../../channels/discord/normalize.ts';
import type { InboundMessage } from '../../../src/core/message.ts';

const BOT = '1000000000000000001';
const ROLE = '7000000000000000001';
const bot = { accountId: 'default', botUserId: BOT, botRoleIds: [ROLE], receivedAt: 1_700_000_000_000 };

function facts(overrides: Partial<DiscordMessageFacts> = {}): DiscordMessageFacts {
  return {
    id: '9000000000000000001', channelId: '5000000000000000001', channelType: ChannelType.GuildText, guildId: '4000000000000000001',
    author: { id: '2000000000000000002', username: 'alice', globalName: 'Alice', bot: false },
    content: 'hello', mentionedUsers: [], mentionedRoleIds: [], attachments: [], ...overrides,
  };
}

function message(overrides: Partial<DiscordMessageFacts> = {}): InboundMessage {
  const result = normalizeDiscordMessage(facts(overrides), bot);
  if (result.kind !== 'message') throw new Error(`ignored: ${result.reason}`);
  return result.message;
}

describe('normalizeDiscordMessage', () => {
  it('maps a DM to a direct chat with the author as peer', () => {
    const m = message({ channelType: ChannelType.DM, guildId: null, channelId: '3000000000000000003' });
    expect(m).toMatchObject({ channel: 'discord', accountId: 'default', chatType: 'direct', chatId: '3000000000000000003', peerId: '2000000000000000002', text: 'hello', receivedAt: bot.receivedAt });
    expect(m.groupId).toBeUndefined();
    expect(m.threadId).toBeUndefined();
  });

  it('maps a guild text or announcement channel to a channel chat, with the guild as container', () => {
    for (const channelType of [ChannelType.GuildText, ChannelType.GuildAnnouncement, ChannelType.GuildVoice]) {
      expect(message({ channelType })).toMatchObject({ chatType: 'channel', chatId: '5000000000000000001', groupId: '5000000000000000001', containerIds: ['4000000000000000001'] });
    }
  });

  it('maps a thread to its parent channel plus the thread, replying in the thread', () => {
    for (const channelType of [ChannelType.PublicThread, ChannelType.PrivateThread, ChannelType.AnnouncementThread]) {
      const m = message({ channelType, channelId: '6000000000000000001', parentId: '5000000000000000001' });
      expect(m).toMatchObject({ chatType: 'channel', chatId: '6000000000000000001', groupId: '5000000000000000001', threadId: '6000000000000000001', threadKind: 'thread' });
    }
  });

  it('ignores its own messages, bots, webhooks, system messages, empty messages and unsupported places', () => {
    const reason = (o: Partial<DiscordMessageFacts>) => {
      const r = normalizeDiscordMessage(facts(o), bot);
      return r.kind === 'ignored' ? r.reason : 'kept';
    };
    expect(reason({ author: { id: BOT, username: 'me', bot: true } })).toBe('own message');
    expect(reason({ author: { id: '2', username: 'other', bot: true } })).toMatch(/bot/);
    expect(reason({ webhookId: '123' })).toMatch(/webhook/);
    expect(reason({ system: true })).toBe('system message');
    expect(reason({ content: `<@${BOT}>` })).toBe('empty message');
    expect(reason({ channelType: ChannelType.GroupDM, guildId: null })).toMatch(/unsupported/);
    expect(reason({ channelType: ChannelType.GuildText, guildId: null })).toMatch(/unsupported/);
  });

  it('detects a user mention, a mention of the bot role, and a reply to the bot', () => {
    expect(message({ content: 'no mention here' }).mentionsBot).toBe(false);
    expect(message({ content: '<@2000000000000000003> not the bot', mentionedUsers: [{ id: '2000000000000000003', name: 'Bob' }] }).mentionsBot).toBe(false);
    expect(message({ content: `<@${BOT}> hi`, mentionedUsers: [{ id: BOT, name: 'switchboard' }] }).mentionsBot).toBe(true);
    expect(message({ content: `<@!${BOT}> hi` }).mentionsBot).toBe(true);
    expect(message({ content: `<@&${ROLE}> hi`, mentionedRoleIds: [ROLE] }).mentionsBot).toBe(true);
    expect(message({ content: '<@&7000000000000000999> hi', mentionedRoleIds: ['7000000000000000999'] }).mentionsBot).toBe(false);
    const reply = message({ content: 'and then?', reference: { messageId: '9000000000000000000', authorId: BOT, content: 'earlier answer' } });
    expect(reply.mentionsBot).toBe(true);
    expect(reply.replyTo).toEqual({ id: '9000000000000000000', text: 'earlier answer', fromBot: true });
    expect(message({ content: 'to a person', reference: { messageId: '1', authorId: '2000000000000000003' } }).mentionsBot).toBe(false);
  });

  it('names the sender by server nickname, then display name, then username', () => {
    expect(message({ memberName: 'Ali' }).sender).toEqual({ id: '2000000000000000002', name: 'Ali', username: 'alice', isBot: false });
    expect(message().sender.name).toBe('Alice');
    expect(message({ author: { id: '2000000000000000002', username: 'alice', globalName: null, bot: false } }).sender.name).toBe('alice');
  });

  it('lists attachments with type, URL, name and size', () => {
    const m = message({
      content: '',
      attachments: [
        { id: '1', url: 'https://cdn.example/a.png', name: 'a.png', size: 10, contentType: 'image/png' },
        { id: '2', url: 'https://cdn.example/b.bin', name: 'b.bin', size: 20, contentType: null },
      ],
    });
    expect(m.text).toBe('');
    expect(m.attachments).toEqual([
      { type: 'image', fileId: '1', url: 'https://cdn.example/a.png', name: 'a.png', mimeType: 'image/png', size: 10 },
      { type: 'file', fileId: '2', url: 'https://cdn.example/b.bin', name: 'b.bin', size: 20 },
    ]);
  });
});

describe('cleanText', () => {
  const clean = (text: string, users: { id: string; name: string }[] = []) => cleanText(text, { botUserId: BOT, botRoleIds: [ROLE] }, users);

  it('removes the bot mention and what it leaves behind', () => {
    expect(clean(`<@${BOT}> what time is it?`)).toBe('what time is it?');
    expect(clean(`<@!${BOT}>, what time is it?`)).toBe('what time is it?');
    expect(clean(`<@&${ROLE}>: status`)).toBe('status');
    expect(clean(`hey <@${BOT}> what's up`)).toBe("hey what's up");
    expect(clean(`thanks <@${BOT}>!`)).toBe('thanks!');
  });

  it('shows other people by name and keeps other roles and code indentation', () => {
    expect(clean(`<@${BOT}> ask <@2000000000000000003> and <@&123>`, [{ id: '2000000000000000003', name: 'Bob' }])).toBe('ask @Bob and <@&123>');
    expect(clean(`<@${BOT}> fix this:\n\`\`\`py\ndef f():\n    return  1\n\`\`\``)).toBe('fix this:\n```py\ndef f():\n    return  1\n```');
  });
});

describe('normalizeDiscordMessage: places, mentions, replies and files', () => {
  it('a text channel in a category (it has a parent) is not a thread; a thread without a known parent is a channel of its own', () => {
    const inCategory = message({ parentId: '8000000000000000001' });
    expect(inCategory).toMatchObject({ chatType: 'channel', groupId: '5000000000000000001' });
    expect(inCategory.threadId).toBeUndefined();
    const orphan = message({ channelType: ChannelType.PublicThread, channelId: '6000000000000000001', parentId: null });
    expect(orphan).toMatchObject({ chatType: 'channel', groupId: '6000000000000000001' });
    expect(orphan.threadId).toBeUndefined();
  });

  it('forums, categories and other guild places are not chats', () => {
    for (const channelType of [ChannelType.GuildForum, ChannelType.GuildCategory, ChannelType.GuildDirectory]) {
      const r = normalizeDiscordMessage(facts({ channelType }), bot);
      expect(r).toEqual({ kind: 'ignored', reason: `unsupported channel type ${channelType}` });
    }
  });

  it('the bot is addressed when Discord lists it or its role as mentioned, also without the tag in the text', () => {
    expect(message({ content: 'replying', mentionedUsers: [{ id: BOT, name: 'switchboard' }] }).mentionsBot).toBe(true);
    expect(message({ content: 'team', mentionedRoleIds: [ROLE] }).mentionsBot).toBe(true);
    expect(message({ content: `<@&${ROLE}> status` }).mentionsBot).toBe(true);
    expect(message({ content: 'others', mentionedUsers: [{ id: '2000000000000000003', name: 'Bob' }], mentionedRoleIds: ['7000000000000000999'] }).mentionsBot).toBe(false);
  });

  it('a reply to a person is not from the bot; a reply without the text of the message has no text', () => {
    expect(message({ content: 'to a person', reference: { messageId: '1', authorId: '2000000000000000003' } }).replyTo).toStrictEqual({ id: '1', fromBot: false });
  });

  it('attachment types by content type; no size, no size field', () => {
    const m = message({
      content: '',
      attachments: [
        { id: '1', url: 'https://cdn.example/v.mp4', contentType: 'video/mp4', size: null },
        { id: '2', url: 'https://cdn.example/a.ogg', contentType: 'audio/ogg' },
        { id: '3', url: '', name: 'doc.pdf', contentType: 'application/pdf', size: 3 },
      ],
    });
    expect(m.attachments).toStrictEqual([
      { type: 'video', fileId: '1', url: 'https://cdn.example/v.mp4', mimeType: 'video/mp4' },
      { type: 'audio', fileId: '2', url: 'https://cdn.example/a.ogg', mimeType: 'audio/ogg' },
      { type: 'file', fileId: '3', name: 'doc.pdf', mimeType: 'application/pdf', size: 3 },
    ]);
  });
});

describe('cleanText: more mentions', () => {
  const clean = (text: string, users: { id: string; name: string }[] = []) => cleanText(text, { botUserId: BOT, botRoleIds: [ROLE] }, users);
  const bob = [{ id: '2000000000000000003', name: 'Bob' }];

  it('several leading mentions of the bot and its role go, with the comma after them', () => {
    expect(clean(`<@${BOT}> <@&${ROLE}>, hi`)).toBe('hi');
    expect(clean(`<@${BOT}>, hi`)).toBe('hi');
  });

  it('a leading mention of someone else keeps the prefix: only the bot mention goes', () => {
    expect(clean(`<@2000000000000000003> <@${BOT}> hi`, bob)).toBe('@Bob hi');
    expect(clean(`<@!2000000000000000003> look`, bob)).toBe('@Bob look');
  });

  it('a bot mention right after a word or a comma goes; a role is never shown as a person', () => {
    expect(clean(`hey<@${BOT}> there`)).toBe('hey there');
    expect(clean(`hey,<@${BOT}> there`)).toBe('hey, there');
    expect(clean('ping <@&2000000000000000003>', bob)).toBe('ping <@&2000000000000000003>');
  });
});
