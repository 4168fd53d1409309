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
      { type: 'photo', fileId: 'p-big', mimeType: 'image/jpeg', size: 900, width: 9, height: 9 },
      { type: 'document', fileId: 'doc-1', name: 'report.pdf', mimeType: 'application/pdf', size: 12345 },
      { type: 'voice', fileId: 'voice-1', mimeType: 'audio/ogg', size: 4567, durationSeconds: 3 },
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

describe('normalizeUpdate: malformed updates are refused with their reason', () => {
  const good = () => dm('hello').message as Record<string, unknown>;
  const file = { file_id: 'f', file_unique_id: 'u' };

  it.each([
    ['a message that is not an object', () => 'text', 'not an object'],
    ['a message that is a list', () => [good()], 'not an object'],
    ['no chat', () => ({ ...good(), chat: undefined }), 'no chat id'],
    ['a chat that is a list', () => ({ ...good(), chat: [42] }), 'no chat id'],
    ['a chat id that is text', () => ({ ...good(), chat: { id: '42', type: 'private' } }), 'no chat id'],
    ['a chat id that is not an integer', () => ({ ...good(), chat: { id: 4.2, type: 'private' } }), 'no chat id'],
    ['no chat type', () => ({ ...good(), chat: { id: 42 } }), 'no chat type'],
    ['no message id', () => ({ ...good(), message_id: undefined }), 'no message id'],
    ['a sender without an id', () => ({ ...good(), from: { first_name: 'A' } }), 'a sender without an id'],
    ['a sender that is not an object', () => ({ ...good(), from: 42 }), 'a sender without an id'],
    ['a sender chat without an id', () => ({ ...good(), sender_chat: { title: 'T' } }), 'a sender chat without an id'],
    ['numeric text', () => ({ ...good(), text: 5 }), 'text that is not a string'],
    ['a numeric caption', () => ({ ...good(), caption: 5 }), 'text that is not a string'],
    ['entities that are an object', () => ({ ...good(), entities: {} }), 'entities that are not a list'],
    ['caption entities that are text', () => ({ ...good(), caption_entities: 'x' }), 'entities that are not a list'],
    ['a reply without a message id', () => ({ ...good(), reply_to_message: { text: 'x' } }), 'a reply to a message without an id'],
    ['a photo that is not a list', () => ({ ...good(), photo: file }), 'photo without file ids'],
    ['a photo size without a file id', () => ({ ...good(), photo: [file, { width: 1 }] }), 'photo without file ids'],
    ['a document without a file id', () => ({ ...good(), document: { file_name: 'x' } }), 'document without a file id'],
    ['a sticker with a numeric file id', () => ({ ...good(), sticker: { file_id: 5 } }), 'sticker without a file id'],
    ['a video note that is text', () => ({ ...good(), video_note: 'v' }), 'video_note without a file id'],
  ])('%s', (_name, message, why) => {
    expect(ignored({ message: message() })).toBe(`malformed message: ${why}`);
  });

  it('null optional fields are absent fields', () => {
    const m = normalize({ message: { ...good(), sender_chat: null, caption: null, caption_entities: null, reply_to_message: null, photo: null, document: null } });
    expect(m).toMatchObject({ text: 'hello', sender: { id: '42' }, attachments: [] });
    expect(m.replyTo).toBeUndefined();
  });

  it('an update with nothing in it says so', () => {
    expect(ignored({})).toBe('unsupported update (empty)');
    expect(ignored({ edited_channel_post: { message_id: 1 } })).toBe('edited message');
  });
});

describe('normalizeUpdate: entities, commands, replies and media', () => {
  const plain = () => {
    const { text: _t, entities: _e, ...rest } = dm('x').message as Record<string, unknown>;
    return rest;
  };

  it('names every kind of unsupported update', () => {
    expect(ignored({ callback_query: { id: '1' }, poll: { id: '2' } })).toBe('unsupported update (callback_query, poll)');
  });

  it('whitespace alone is not a message', () => {
    expect(ignored(dm('   '))).toBe('service message without text or media');
  });

  it('a message without a sender is from its chat; a sender without a last name has just the first name', () => {
    const { from: _f, ...noSender } = groupMessage(-7, 'hello').message as Record<string, unknown>;
    expect(normalize({ message: noSender }).sender).toStrictEqual({ id: '-7' });
    expect(normalize(groupMessage(-7, 'hi', { from: BOB })).sender).toStrictEqual({ id: '43', name: 'Bob', username: 'bob', isBot: false });
  });

  it('a reply to a message without a sender (a channel post) is a reply, not to the bot', () => {
    const update = groupMessage(-1, 'about that', { extra: { reply_to_message: { message_id: 5, date: 1, chat: { id: -1, type: 'group' }, caption: 'the post' } } });
    expect(normalize(update)).toMatchObject({ replyTo: { id: '-1:5', text: 'the post', fromBot: false }, mentionsBot: false });
  });

  it("in a topic, a reply to the topic's first message is not a reply even without forum_topic_created", () => {
    const base = topicMessage(-1005, 7, 'plain message in the topic');
    const update = { message: { ...base.message, reply_to_message: { message_id: 7, date: 1, chat: base.message.chat, from: BOB, text: 'opener' } } };
    expect(normalize(update).replyTo).toBeUndefined();
  });

  it('entities Telegram did not send whole are dropped: the text is searched instead, and a text mention without a user is no mention', () => {
    const torn = groupMessage(-1, 'hi @switchboard_test_bot', { extra: { entities: [{ type: 'mention', offset: 'x', length: 3 }] } });
    expect(normalize(torn).mentionsBot).toBe(true);
    const noUser = groupMessage(-1, 'Bot hi', { extra: { entities: [{ type: 'text_mention', offset: 0, length: 3 }] } });
    expect(normalize(noUser).mentionsBot).toBe(false);
  });

  it('mentions: any mention entity of the bot counts; a handle in code, a text mention of someone else, the handle without entities in any case', () => {
    expect(normalize(groupMessage(-1, 'hey @someone_else and @switchboard_test_bot')).mentionsBot).toBe(true);
    expect(normalize(groupMessage(-1, 'type @switchboard_test_bot', { extra: { entities: [{ type: 'code', offset: 5, length: 21 }] } })).mentionsBot).toBe(false);
    expect(normalize(groupMessage(-1, 'hey Bob', { extra: { entities: [{ type: 'text_mention', offset: 4, length: 3, user: BOB }] } })).mentionsBot).toBe(false);
    expect(normalize(groupMessage(-1, 'ping @SWITCHBOARD_TEST_BOT', { extra: { entities: undefined } })).mentionsBot).toBe(true);
  });

  it('commands: only at the very start; the entity gives its length; without entities the text is read', () => {
    // A command further on is text; one for this bot followed by words is for this bot.
    expect(normalize(groupMessage(-1, 'see /start@other_bot', { extra: { entities: [{ type: 'bot_command', offset: 4, length: 16 }] } })).mentionsBot).toBe(false);
    expect(normalize(groupMessage(-1, '/status@switchboard_test_bot now')).mentionsBot).toBe(true);
    // A DM that starts with a mention of someone else is not a command.
    expect(normalize(dm('@someone_else hi')).mentionsBot).toBe(false);
    const bare = (text: string) => groupMessage(-1, text, { extra: { entities: undefined } });
    expect(ignored(bare('/status@other_bot'))).toBe('command for another bot (@other_bot)');
    expect(ignored(bare('/status@other_bot please'))).toBe('command for another bot (@other_bot)');
    expect(ignored(bare('hi /status@other_bot'))).toBeUndefined();
    expect(ignored(bare('/status@other_bot,now'))).toBeUndefined();
    expect(normalize(dm('/status', { extra: { entities: undefined } })).mentionsBot).toBe(true);
  });

  it('the largest photo of three; animation (not again as document), audio named by its title, video, video note and sticker', () => {
    const photo = [10, 20, 30].map((n) => ({ file_id: `p${n}`, file_unique_id: `u${n}`, width: n, height: n, file_size: n }));
    const m = normalize({
      message: {
        ...plain(), caption: 'media',
        photo,
        animation: { file_id: 'anim', file_unique_id: 'a', width: 1, height: 1, duration: 1, file_name: 'cat.mp4', mime_type: 'video/mp4', file_size: 5 },
        document: { file_id: 'anim', file_unique_id: 'a', file_name: 'cat.mp4' },
        audio: { file_id: 'song', file_unique_id: 's', duration: 60, title: 'Song', mime_type: 'audio/mpeg' },
        video: { file_id: 'vid', file_unique_id: 'v', width: 1, height: 1, duration: 2, file_name: 'clip.mov', mime_type: 'video/quicktime', file_size: 7 },
        video_note: { file_id: 'note', file_unique_id: 'n', length: 1, duration: 3, file_size: 8 },
        sticker: { file_id: 'st', file_unique_id: 't', type: 'regular', width: 1, height: 1, is_animated: false, is_video: false, emoji: '👍' },
      },
    });
    expect(m.attachments).toStrictEqual([
      { type: 'photo', fileId: 'p30', mimeType: 'image/jpeg', size: 30, width: 30, height: 30 },
      { type: 'video', fileId: 'anim', name: 'cat.mp4', mimeType: 'video/mp4', size: 5, durationSeconds: 1, width: 1, height: 1 },
      { type: 'audio', fileId: 'song', name: 'Song', mimeType: 'audio/mpeg', durationSeconds: 60 },
      { type: 'video', fileId: 'vid', name: 'clip.mov', mimeType: 'video/quicktime', size: 7, durationSeconds: 2, width: 1, height: 1 },
      { type: 'video', fileId: 'note', mimeType: 'video/mp4', size: 8, durationSeconds: 3, width: 1, height: 1 },
      { type: 'sticker', fileId: 'st', name: '👍', mimeType: 'image/webp', width: 1, height: 1 },
    ]);
  });

  it('the correlation id of the context is kept', () => {
    const result = normalizeUpdate({ update_id: 3, ...dm('hi') } as never, { ...context, correlationId: 'corr-9' });
    expect('message' in result && result.message.correlationId).toBe('corr-9');
  });

  it('telegramMessageId: zero and negative ids are not message ids', () => {
    expect(telegramMessageId('-100123:0')).toBeUndefined();
    expect(telegramMessageId('-7')).toBeUndefined();
  });
});
