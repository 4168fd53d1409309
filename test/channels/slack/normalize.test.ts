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

describe('normalizeSlackEvent: what is refused, and why', () => {
  const base = { type: 'message', channel: 'D1', channel_type: 'im', user: 'U42', text: 'hi', ts: '1700000000.000100' };
  const raw = (event: unknown): NormalizeInput => ({ event: event as SlackMessageEvent, envelope: { event_id: 'Ev1' }, accountId: 'default', bot, receivedAt: 1000 });

  it.each([
    ['null', null, 'not an object'],
    ['an array', [base], 'not an object'],
    ['a numeric type', { ...base, type: 5 }, 'no type'],
    ['a user with a space', { ...base, user: 'U 1' }, 'user is not an id'],
    ['a user with a colon (it would end up in a session key)', { ...base, user: 'a:b' }, 'user is not an id'],
    ['a numeric user', { ...base, user: 42 }, 'user is not an id'],
    ['a channel with a colon', { ...base, channel: 'C:1' }, 'channel is not an id'],
    ['an empty ts', { ...base, ts: '' }, 'ts is not an id'],
    ['a thread_ts with a space', { ...base, thread_ts: '1 2' }, 'thread_ts is not an id'],
    ['an object as team', { ...base, team: {} }, 'team is not an id'],
    ['a numeric text', { ...base, text: 5 }, 'text is not a string'],
    ['a boolean bot_id', { ...base, bot_id: true }, 'bot_id is not a string'],
    ['a text hidden flag', { ...base, hidden: 'yes' }, 'hidden is not a boolean'],
    ['files that are not a list', { ...base, files: 'F1' }, 'files without ids'],
    ['a file without an id', { ...base, files: [{ name: 'x' }] }, 'files without ids'],
    ['one bad file id among good ones', { ...base, files: [{ id: 'F1' }, { id: 'bad id' }] }, 'files without ids'],
    ['a numeric file id', { ...base, files: [{ id: 5 }] }, 'files without ids'],
    ['a null file', { ...base, files: [null] }, 'files without ids'],
    ['a text user_profile', { ...base, user_profile: 'Bob' }, 'user_profile is not an object'],
    ['a list as user_profile', { ...base, user_profile: [] }, 'user_profile is not an object'],
  ])('a malformed event is ignored with its reason: %s', (_name, event, why) => {
    expect(reason(raw(event))).toBe(`malformed event: ${why}`);
  });

  it('null optional fields are absent fields, not malformed', () => {
    const m = message(raw({ ...base, thread_ts: null, team: null, subtype: null, bot_id: null, hidden: null, files: null, user_profile: null }));
    expect(m).toMatchObject({ chatType: 'direct', text: 'hi', attachments: [] });
    expect(m.threadId).toBeUndefined();
  });

  it('other event types, bot messages without a bot id, hidden events and events without user, channel or ts', () => {
    expect(reason(input({ type: 'reaction_added' }))).toBe('event type reaction_added');
    expect(reason(input({ subtype: 'bot_message' }))).toBe('bot message');
    expect(reason(input({ hidden: true }))).toBe('hidden');
    expect(reason(input({ user: undefined }))).toBe('no user, channel or ts');
    expect(reason(input({ channel: undefined }))).toBe('no user, channel or ts');
    expect(reason(input({ ts: undefined }))).toBe('no user, channel or ts');
  });
});

describe('normalizeSlackEvent: fields of the message', () => {
  it('a DM that mentions the bot is answered (only channel mentions wait for app_mention), without the mention', () => {
    expect(message(input({ text: '<@UBOT> hello' }))).toMatchObject({ chatType: 'direct', text: 'hello', mentionsBot: true });
  });

  it('an app_mention is addressed to the bot by its type, also when the bot does not know its own user id yet', () => {
    const m = message(input({ type: 'app_mention', channel: 'C9', channel_type: undefined, text: 'hi all' }, { bot: { userId: '' } }));
    expect(m.mentionsBot).toBe(true);
  });

  it('a thread reply counts as addressed only in a thread the bot answered in; botThread alone is not a thread', () => {
    expect(message(input({ channel: 'C9', channel_type: 'channel', thread_ts: '1.5', ts: '1.6' })).mentionsBot).toBe(false);
    expect(message(input({ channel: 'C9', channel_type: 'channel', ts: '1.6' }, { botThread: {} })).mentionsBot).toBe(false);
  });

  it('the team is the event team, else the envelope team id (a string), else the bot team; none leaves no container', () => {
    const withEnvelope = (envelope: Record<string, unknown>, event: Partial<SlackMessageEvent> = {}, teamId?: string) =>
      message(input(event, { envelope, bot: { ...bot, teamId } })).containerIds;
    expect(withEnvelope({ team_id: 'T2' }, { team: 'T9' }, 'T1')).toEqual(['T9']);
    expect(withEnvelope({ team_id: 'T2' }, {}, 'T1')).toEqual(['T2']);
    expect(withEnvelope({ team_id: 5 }, {}, 'T1')).toEqual(['T1']);
    expect(withEnvelope({}, {}, 'T1')).toEqual(['T1']);
    expect(withEnvelope({}, {}, undefined)).toBeUndefined();
  });

  it('the event id is the delivery id only when it is a non-empty string', () => {
    for (const envelope of [{}, { event_id: '' }, { event_id: 5 }]) {
      expect(message(input({}, { envelope: envelope as NormalizeInput['envelope'] }))).not.toHaveProperty('deliveryId');
    }
  });

  it('the sender name: the looked-up name, else the display name, else the real name; the profile name is the username', () => {
    const sender = (profile: unknown, senderName?: string) => message(input({ user_profile: profile as SlackMessageEvent['user_profile'] }, senderName ? { senderName } : {})).sender;
    expect(sender({ display_name: 'Ally', real_name: 'Alice Smith', name: 'alice' }, 'Alice (users.info)')).toStrictEqual({ id: 'U42', name: 'Alice (users.info)', username: 'alice' });
    expect(sender({ display_name: 'Ally', real_name: 'Alice Smith' })).toStrictEqual({ id: 'U42', name: 'Ally' });
    expect(sender({ display_name: '', real_name: 'Alice Smith' })).toStrictEqual({ id: 'U42', name: 'Alice Smith' });
    expect(sender({ display_name: '', real_name: '', name: 7 })).toStrictEqual({ id: 'U42' });
  });

  it('files: image/ types are images, others files; a name that is not text is not a name; no size, no size field', () => {
    const m = message(input({ subtype: 'file_share', text: '', files: [{ id: 'F1', name: 5 as unknown as string, title: 'Report', mimetype: 'application/pdf' }, { id: 'F2' }] }));
    expect(m.attachments).toStrictEqual([{ type: 'file', fileId: 'F1', name: 'Report', mimeType: 'application/pdf' }, { type: 'file', fileId: 'F2' }]);
  });
});

describe('slackToPlainText', () => {
  it('removes every mention of the bot, and names other people by their label', () => {
    expect(slackToPlainText('<@UBOT> hi <@UBOT|bot> and <@U2|alice> and <@U3>', 'UBOT')).toBe('hi and @alice and @U3');
  });

  it('a link labelled with its own address (or its mail address) is written once', () => {
    expect(slackToPlainText('<https://x.com|https://x.com> <mailto:a@b.c|a@b.c> <mailto:a@b.c|Ann>', 'UBOT')).toBe('https://x.com a@b.c Ann (mailto:a@b.c)');
  });

  it('broadcasts and user groups by their label or name; entities unescaped', () => {
    expect(slackToPlainText('<!channel> <!subteam^S1|@team> <!date^1700000000^{date}|Nov 14> a &gt; b &lt; c &amp; d', 'UBOT')).toBe('@channel @team Nov 14 a > b < c & d');
  });
});

describe('tsOfMessageId', () => {
  it('is undefined without an id, and for anything but <channel>:<digits>.<digits> or a bare ts', () => {
    expect(tsOfMessageId(undefined)).toBeUndefined();
    expect(tsOfMessageId('')).toBeUndefined();
    expect(tsOfMessageId('1700000000.000100')).toBe('1700000000.000100');
    expect(tsOfMessageId('C1:x1700000000.000100')).toBeUndefined();
    expect(tsOfMessageId('C1:1700000000.000100x')).toBeUndefined();
  });
});
