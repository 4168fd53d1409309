import { describe, expect, it } from 'vitest';
import { messageKey, normalizeUpdate, telegramMessageId, type NormalizeContext } from '../../../channels/telegram/normalize.ts';
import type { InboundMessage } from '../../../src/core/message.ts';
import { BOB, BOT, dm, groupMessage, topicMessage } from './updates.ts';

const context: NormalizeContext = { accountId: 'default', bot: { id: BOT.id, username: BOT.username }, now: 1_767_225_601_000 };

function normalize(update: Record<string, unknown>, updateId = 10): InboundMessage {
  const result = normalizeUpdate({ update_id: updateId, ...update }, context);
  if ('ignored' in result) throw new Error(`ignored: ${result.ignored}`);
  return result.message;
}

function ignored(update: Record<string, unknown>): string | undefined {
  const result = normalizeUpdate({ update_id: 1, ...update }, context);
  return 'ignored' in result ? result.ignored : undefined;
}

describe('normalizeUpdate (Telegram update → InboundMessage)', () => {
  it('a private chat is a direct message from the peer, with the update id as delivery id', () => {
    const update = dm('hello');
    const m = normalize(update, 55);
    expect(m).toMatchObject({
      id: `42:${update.message.message_id}`, deliveryId: '55', channel: 'telegram', accountId: 'default', chatType: 'direct',
      chatId: '42', peerId: '42', text: 'hello', attachments: [], mentionsBot: false, receivedAt: context.now,
      sender: { id: '42', name: 'Alice Liddell', username: 'alice', isBot: false },
    });
    expect(m.groupId).toBeUndefined();
    expect(m.threadId).toBeUndefined();
  });

  it('groups and supergroups are group chats keyed by the chat id; the peer is the sender', () => {
    for (const chatId of [-4001, -1001234567890]) {
      const m = normalize(groupMessage(chatId, 'hi all', { from: BOB }));
      expect(m).toMatchObject({ chatType: 'group', chatId: String(chatId), groupId: String(chatId), peerId: '43', mentionsBot: false });
    }
  });

  it('a forum topic gives the thread id and kind "topic"; its opening message is not a reply', () => {
    const m = normalize(topicMessage(-1005, 7, 'in the topic'));
    expect(m).toMatchObject({ threadId: '7', threadKind: 'topic', groupId: '-1005' });
    expect(m.replyTo).toBeUndefined();
    expect(m.mentionsBot).toBe(false);
  });

  it('the General topic and reply threads of ordinary supergroups have no thread id', () => {
    const general = normalize(groupMessage(-1005, 'general', { extra: {} }));
    expect(general.threadId).toBeUndefined();
    const replyThread = normalize(groupMessage(-1006, 'threaded reply', { extra: { message_thread_id: 99 } }));
    expect(replyThread.threadId).toBeUndefined();
  });

  it('a real reply inside a topic keeps the topic and records the reply', () => {
    const base = topicMessage(-1005, 7, 'replying in topic');
    const update = { message: { ...base.message, reply_to_message: { message_id: 30, date: 1, chat: base.message.chat, from: BOB, text: 'earlier', message_thread_id: 7, is_topic_message: true } } };
    const m = normalize(update);
    expect(m).toMatchObject({ threadId: '7', replyTo: { id: '-1005:30', text: 'earlier', fromBot: false }, mentionsBot: false });
  });

  it('mentions: @botname (any case), a text mention, a reply to the bot, /command@botname, a bare /command only in private', () => {
    expect(normalize(groupMessage(-1, 'hey @Switchboard_Test_Bot look')).mentionsBot).toBe(true);
    expect(normalize(groupMessage(-1, 'hey @someone_else look')).mentionsBot).toBe(false);
    const textMention = groupMessage(-1, 'hey Bot', { extra: { entities: [{ type: 'text_mention', offset: 4, length: 3, user: BOT }] } });
    expect(normalize(textMention).mentionsBot).toBe(true);
    const replyToBot = groupMessage(-1, 'thanks', { extra: { reply_to_message: { message_id: 9, date: 1, chat: { id: -1, type: 'group', title: 'g' }, from: BOT, text: 'answer' } } });
    expect(normalize(replyToBot)).toMatchObject({ mentionsBot: true, replyTo: { id: '-1:9', text: 'answer', fromBot: true } });
    expect(normalize(groupMessage(-1, '/status@switchboard_test_bot')).mentionsBot).toBe(true);
    expect(normalize(groupMessage(-1, '/status')).mentionsBot).toBe(false);
    expect(normalize(dm('/status')).mentionsBot).toBe(true);
    // Without entities (hand-made updates), the text is searched.
    expect(normalize(groupMessage(-1, 'ping @switchboard_test_bot', { extra: { entities: undefined } })).mentionsBot).toBe(true);
    expect(normalize(groupMessage(-1, 'mail x@switchboard_test_bot.com', { extra: { entities: undefined } })).mentionsBot).toBe(false);
  });

  it('a caption is the text; photo (largest size), document and voice are listed with file id and size', () => {
    const { text: _t, entities: _e, ...plain } = dm('x').message as Record<string, unknown>;
    const m = normalize({
      message: {
        ...plain, caption: 'see attached',
        photo: [{ file_id: 'p-small', file_unique_id: 'a', width: 1, height: 1, file_size: 10 }, { file_id: 'p-big', file_unique_id: 'b', width: 9, height: 9, file_size: 900 }],
        document: { file_id: 'doc-1', file_unique_id: 'c', file_name: 'report.pdf', mime_type: 'application/pdf', file_size: 12345 },
        voice: { file_id: 'voice-1', file_unique_id: 'd', duration: 3, mime_type: 'audio/ogg', file_size: 4567 },
      },
    });
    expect(m.text).toBe('see attached');
    expect(m.attachments).toEqual([
      { type: 'photo', fileId: 'p-big', size: 900 },
      { type: 'document', fileId: 'doc-1', name: 'report.pdf', mimeType: 'application/pdf', size: 12345 },
      { type: 'voice', fileId: 'voice-1', mimeType: 'audio/ogg', size: 4567 },
    ]);
  });

  it('a voice message without text is still a message', () => {
    const { text: _t, entities: _e, ...plain } = dm('x').message as Record<string, unknown>;
    const m = normalize({ message: { ...plain, voice: { file_id: 'v', file_unique_id: 'v', duration: 1 } } });
    expect(m).toMatchObject({ text: '', attachments: [{ type: 'voice', fileId: 'v' }] });
  });

  it('an anonymous admin posting as the group is the group, not a bot', () => {
    const update = groupMessage(-1001, 'announcement', { from: { id: 1087968824, is_bot: true, first_name: 'Group', username: 'GroupAnonymousBot' }, extra: { sender_chat: { id: -1001, type: 'supergroup', title: 'Team' } } });
    expect(normalize(update).sender).toEqual({ id: '-1001', name: 'Team', isBot: false });
  });

  it('another bot stays marked as a bot (the gateway refuses it)', () => {
    expect(normalize(groupMessage(-1, 'beep', { from: { id: 5, is_bot: true, first_name: 'Other', username: 'other_bot' } })).sender.isBot).toBe(true);
  });

  it('ignores edits, channel posts, the bot itself, empty service messages and commands for another bot in groups', () => {
    expect(ignored({ edited_message: dm('fixed typo').message })).toBe('edited message');
    expect(ignored({ channel_post: { message_id: 1, date: 1, chat: { id: -100, type: 'channel', title: 'c' }, text: 'news' } })).toBe('channel post');
    expect(ignored(groupMessage(-1, 'my own words', { from: BOT }))).toBe("the bot's own message");
    const { text: _t, entities: _e, ...service } = groupMessage(-1, 'x').message as Record<string, unknown>;
    expect(ignored({ message: { ...service, new_chat_members: [BOB] } })).toMatch(/service message/);
    expect(ignored(groupMessage(-1, '/status@other_bot'))).toBe('command for another bot (@other_bot)');
    expect(ignored({ callback_query: { id: '1' } })).toMatch(/unsupported update \(callback_query\)/);
  });

  it('message keys carry the chat id (message ids repeat across chats) and read back', () => {
    expect(messageKey(-100123, 45)).toBe('-100123:45');
    expect(telegramMessageId('-100123:45')).toBe(45);
    expect(telegramMessageId('45')).toBe(45);
    expect(telegramMessageId('abc')).toBeUndefined();
    expect(telegramMessageId(undefined)).toBeUndefined();
  });
});
