import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../../src/main.ts';
import { lastUser, startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { sentTo, sessionKeys, startTelegramGateway, telegramConfig } from './harness.ts';
import { BOB, BOT, groupMessage, topicMessage } from './updates.ts';

const GROUP = -1001234567890;
const OTHER_GROUP = -1009999999999;
const FORUM = -1005555555555;

describe('Telegram groups and forum topics through the gateway', () => {
  let telegram: FakeTelegram;
  let openai: FakeOpenAI;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;

  beforeEach(async () => {
    telegram = await startFakeTelegram();
    openai = await startFakeOpenAI((r) => ({ content: `re: ${lastUser(r).split('\n').at(-1)}` }));
    tmp = tempDir();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await telegram.close();
    await openai.close();
    tmp.remove();
  });

  const start = (telegramSettings: Record<string, unknown> = {}) =>
    startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig({ groups: [String(GROUP), String(FORUM)], ...telegramSettings }) });

  it('keeps an unmentioned group message as context and answers the next one that mentions the bot, as a reply', async () => {
    gw = await start();
    telegram.pushUpdate(groupMessage(GROUP, 'the deploy broke again', { from: BOB }));
    const mention = groupMessage(GROUP, '@switchboard_test_bot what did Bob say?');
    telegram.pushUpdate(mention);
    const reply = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === GROUP);
    expect(reply.body.text).toBe('re: @switchboard_test_bot what did Bob say?');
    expect(reply.body.reply_parameters).toEqual({ message_id: mention.message.message_id, allow_sending_without_reply: true });
    expect(openai.requests).toHaveLength(1); // the first message did not start a run
    const prompt = lastUser(openai.requests[0]!);
    expect(prompt).toContain('[Earlier messages in this chat]\nBob: the deploy broke again');
    expect(sentTo(telegram, GROUP)).toHaveLength(1);
    expect(await sessionKeys(gw)).toEqual([`agent:main:telegram:group:${GROUP}`]);
  });

  it('answers a reply to one of its own messages and a /command@botname, but not a command for another bot', async () => {
    gw = await start();
    telegram.pushUpdate(groupMessage(GROUP, '/status@other_bot'));
    const mine = groupMessage(GROUP, 'thanks, and one more thing', {
      extra: { reply_to_message: { message_id: 77, date: 1, chat: { id: GROUP, type: 'supergroup', title: 'g' }, from: BOT, text: 'an earlier answer' } },
    });
    telegram.pushUpdate(mine);
    const reply = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === GROUP);
    expect(reply.body.text).toBe('re: thanks, and one more thing');
    expect(lastUser(openai.requests[0]!)).toContain('[replying to: an earlier answer]');
    telegram.pushUpdate(groupMessage(GROUP, '/status@switchboard_test_bot'));
    const status = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === GROUP && String(c.body.text).includes('agent:main:telegram:group:'));
    expect(status.body.text).toContain(`agent:main:telegram:group:${GROUP}`);
    expect(sentTo(telegram, GROUP)).toHaveLength(2); // nothing for /status@other_bot
  });

  it('answers every group message when requireMention is false', async () => {
    gw = await start({ requireMention: false });
    telegram.pushUpdate(groupMessage(GROUP, 'anyone around?'));
    const reply = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === GROUP);
    expect(reply.body.text).toBe('re: anyone around?');
  });

  it('ignores a group that is not in the allowlist, even when mentioned', async () => {
    gw = await start();
    telegram.pushUpdate(groupMessage(OTHER_GROUP, '@switchboard_test_bot hello?'));
    telegram.pushUpdate(groupMessage(GROUP, '@switchboard_test_bot hello!'));
    await telegram.waitFor('sendMessage', (c) => c.body.chat_id === GROUP);
    expect(sentTo(telegram, OTHER_GROUP)).toHaveLength(0);
    expect(openai.requests).toHaveLength(1);
    expect(await sessionKeys(gw)).toEqual([`agent:main:telegram:group:${GROUP}`]);
  });

  it('answers every group under groupPolicy open', async () => {
    gw = await start({ groupPolicy: 'open', groups: [] });
    telegram.pushUpdate(groupMessage(OTHER_GROUP, '@switchboard_test_bot hello?'));
    await telegram.waitFor('sendMessage', (c) => c.body.chat_id === OTHER_GROUP);
  });

  it('keeps a forum topic in its own session and answers inside the topic', async () => {
    gw = await start();
    telegram.pushUpdate(topicMessage(FORUM, 7, '@switchboard_test_bot idea for the topic'));
    const reply = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === FORUM);
    expect(reply.body.message_thread_id).toBe(7);
    expect(reply.body.text).toBe('re: @switchboard_test_bot idea for the topic');
    expect(telegram.callsOf('sendChatAction').map((c) => c.body)).toContainEqual({ chat_id: FORUM, action: 'typing', message_thread_id: 7 });
    // The General topic has no thread id: the group's own session.
    telegram.pushUpdate(groupMessage(FORUM, '@switchboard_test_bot in general', { extra: {} }));
    const general = await telegram.waitFor('sendMessage', (c) => c.body.chat_id === FORUM && String(c.body.text).includes('in general'));
    expect(general.body.message_thread_id).toBeUndefined();
    expect(await sessionKeys(gw)).toEqual([`agent:main:telegram:group:${FORUM}`, `agent:main:telegram:group:${FORUM}:topic:7`]);
  });
});
