import { describe, expect, it } from 'vitest';
import { normalizeSlackEvent, slackToPlainText, tsOfMessageId, type NormalizeInput, type SlackMessageEvent } from '../../../channels/slack/normalize.ts';

const bot = { userId: 'UBOT', botId: 'BBOT', teamId: 'T1' };
const input = (event: Partial<SlackMessageEvent>, extra: Partial<NormalizeInput> = {}): NormalizeInput => ({
  event: { type: 'message', channel: 'D1', channel_type: 'im', user: 'U42', text: 'hi', ts: '1700000000.000100', ...event },
  envelope: { event_id: 'Ev1', team_id: 'T1' },
  accountId: 'default', bot, receivedAt: 1000, ...extra,
});
const message = (i: NormalizeInput) => {
  const r = normalizeSlackEvent(i);
  if (r.kind !== 'message') throw new Error(`ignored: ${r.reason}`);
  return r.message;
};
const reason = (i: NormalizeInput) => {
  const r = normalizeSlackEvent(i);
  return r.kind === 'ignored' ? r.reason : 'message';
};

describe('normalizeSlackEvent', () => {
  it('turns message.im into a direct message with the event id as delivery id', () => {
    expect(message(input({}))).toMatchObject({
      id: 'D1:1700000000.000100', deliveryId: 'Ev1', channel: 'slack', accountId: 'default', chatType: 'direct',
      chatId: 'D1', peerId: 'U42', sender: { id: 'U42' }, text: 'hi', attachments: [], receivedAt: 1000, containerIds: ['T1'],
    });
    expect(message(input({})).groupId).toBeUndefined();
  });

  it('turns app_mention into a channel message addressed to the bot, without the mention', () => {
    const m = message(input({ type: 'app_mention', channel: 'C9', channel_type: undefined, text: '<@UBOT> /status' }));
    expect(m).toMatchObject({ chatType: 'channel', chatId: 'C9', groupId: 'C9', mentionsBot: true, text: '/status', containerIds: ['T1'] });
  });

  it('keeps channel, private channel and group DM messages as channel messages, not addressed', () => {
    for (const channelType of ['channel', 'group', 'mpim']) {
      expect(message(input({ channel: 'C9', channel_type: channelType }))).toMatchObject({ chatType: 'channel', groupId: 'C9', mentionsBot: false });
    }
  });

  it('answers a channel mention once: the message copy is ignored, as is an app_mention in a DM', () => {
    expect(reason(input({ channel: 'C9', channel_type: 'channel', text: 'hey <@UBOT>' }))).toMatch(/app_mention/);
    expect(reason(input({ type: 'app_mention', channel: 'D1', channel_type: undefined, text: '<@UBOT> hi' }))).toMatch(/DM/);
  });

  it('sets the thread id from thread_ts (not for the parent itself)', () => {
    expect(message(input({ channel: 'C9', channel_type: 'channel', thread_ts: '1.5', ts: '1.6' })).threadId).toBe('1.5');
    expect(message(input({ channel: 'C9', channel_type: 'channel', thread_ts: '1.6', ts: '1.6' })).threadId).toBeUndefined();
  });

  it('treats a reply in a thread the bot answered in as addressed, seeding it with the bot reply once', () => {
    const seeded = message(input({ channel: 'C9', channel_type: 'channel', thread_ts: '1.5', ts: '1.6' }, { botThread: { lastReply: 'earlier answer' } }));
    expect(seeded).toMatchObject({ mentionsBot: true, replyTo: { id: 'C9:1.5', text: 'earlier answer', fromBot: true } });
    const later = message(input({ channel: 'C9', channel_type: 'channel', thread_ts: '1.5', ts: '1.7' }, { botThread: {} }));
    expect(later.mentionsBot).toBe(true);
    expect(later.replyTo).toBeUndefined();
  });

  it('ignores edits, deletions, joins, hidden events, bot messages and its own messages', () => {
    expect(reason(input({ subtype: 'message_changed' }))).toBe('edit');
    expect(reason(input({ edited: { user: 'U42', ts: '1' } }))).toBe('edit');
    expect(reason(input({ subtype: 'message_deleted' }))).toBe('deletion');
    expect(reason(input({ subtype: 'channel_join' }))).toBe('subtype channel_join');
    expect(reason(input({ subtype: 'bot_message', bot_id: 'B2' }))).toBe('bot message');
    expect(reason(input({ bot_id: 'BBOT' }))).toBe('own message');
    expect(reason(input({ user: 'UBOT' }))).toBe('own message');
    expect(reason(input({ text: '   ' }))).toBe('empty');
  });

  it('lists files as attachments (file_share)', () => {
    const m = message(input({ subtype: 'file_share', text: '', files: [{ id: 'F1', name: 'a.png', mimetype: 'image/png', size: 10 }, { id: 'F2', title: 'Notes' }] }));
    expect(m.attachments).toEqual([{ type: 'image', fileId: 'F1', name: 'a.png', mimeType: 'image/png', size: 10 }, { type: 'file', fileId: 'F2', name: 'Notes' }]);
  });

  it('reads Slack markup back as plain text', () => {
    expect(slackToPlainText('<@UBOT> ask <@U1> in <#C1|general> about <https://e.com|this> &amp; <https://x.io> &lt;3 <!here>', 'UBOT'))
      .toBe('ask @U1 in #general about this (https://e.com) & https://x.io <3 @here');
  });

  it('reads the ts back out of a message id', () => {
    expect(tsOfMessageId('C1:1700000000.000100')).toBe('1700000000.000100');
    expect(tsOfMessageId('webchat-id')).toBeUndefined();
  });
});
