/** Builders of Telegram updates as the Bot API sends them, for tests. */

let nextMessageId = 100;

export const ALICE = { id: 42, is_bot: false, first_name: 'Alice', last_name: 'Liddell', username: 'alice' };
export const BOB = { id: 43, is_bot: false, first_name: 'Bob', username: 'bob' };
export const BOT = { id: 9001, is_bot: true, first_name: 'Switchboard Test', username: 'switchboard_test_bot' };

type User = { id: number; is_bot: boolean; first_name: string; last_name?: string; username?: string };

/** Entities Telegram would attach: @mentions and a leading /command. */
export function entitiesOf(text: string): { type: string; offset: number; length: number }[] {
  const out: { type: string; offset: number; length: number }[] = [];
  const command = /^\/[A-Za-z0-9_]+(?:@[A-Za-z0-9_]+)?/.exec(text);
  if (command) out.push({ type: 'bot_command', offset: 0, length: command[0].length });
  for (const m of text.matchAll(/@[A-Za-z0-9_]{5,32}/g)) {
    if (command && m.index < command[0].length) continue;
    out.push({ type: 'mention', offset: m.index, length: m[0].length });
  }
  return out;
}

function base(chat: Record<string, unknown>, from: User, text: string, extra: Record<string, unknown>) {
  const entities = entitiesOf(text);
  return {
    message_id: nextMessageId++, date: 1_767_225_600, chat, from, text,
    ...(entities.length ? { entities } : {}),
    ...extra,
  };
}

/** A private message. */
export function dm(text: string, options: { from?: User; extra?: Record<string, unknown> } = {}) {
  const from = options.from ?? ALICE;
  return { message: base({ id: from.id, type: 'private', first_name: from.first_name, ...(from.username ? { username: from.username } : {}) }, from, text, options.extra ?? {}) };
}

/** A message in a (super)group. */
export function groupMessage(chatId: number, text: string, options: { from?: User; extra?: Record<string, unknown>; title?: string } = {}) {
  const chat = { id: chatId, type: chatId < -1_000_000_000_000 ? 'supergroup' : 'group', title: options.title ?? 'Test group' };
  return { message: base(chat, options.from ?? ALICE, text, options.extra ?? {}) };
}

/** A message in a forum topic of a supergroup (Telegram sets reply_to_message to the topic's first message). */
export function topicMessage(chatId: number, topicId: number, text: string, options: { from?: User } = {}) {
  const chat = { id: chatId, type: 'supergroup', title: 'Forum', is_forum: true };
  return {
    message: base(chat, options.from ?? ALICE, text, {
      message_thread_id: topicId, is_topic_message: true,
      reply_to_message: { message_id: topicId, date: 1_767_225_000, chat, from: BOB, message_thread_id: topicId, forum_topic_created: { name: 'Ideas', icon_color: 7322096 } },
    }),
  };
}
