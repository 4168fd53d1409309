import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { telegramReactionEmoji } from '../../../channels/telegram/react.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { lastUser, startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { startTelegramGateway, telegramConfig } from './harness.ts';
import { dm, groupMessage } from './updates.ts';

const GROUP = -1001234567890;
const MENTION = '@switchboard_test_bot';

describe('Telegram ack reaction (setMessageReaction when a turn starts)', () => {
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

  const start = (settings: Record<string, unknown> = {}) =>
    startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig({ groups: [String(GROUP)], ...settings }) });
  const reactions = () => telegram.callsOf('setMessageReaction').map((c) => c.body);
  const replyIn = (chatId: number, text: string) => telegram.waitFor('sendMessage', (c) => Number(c.body.chat_id) === chatId && String(c.body.text).includes(text));

  it('puts 👀 on a group message that triggers a run, before the answer; none on one that does not', async () => {
    gw = await start();
    const quiet = groupMessage(GROUP, 'just chatting');
    const asked = groupMessage(GROUP, `${MENTION} what is up?`);
    telegram.pushUpdate(quiet);
    telegram.pushUpdate(asked);
    const reply = await replyIn(GROUP, 'what is up?');
    const reaction = await telegram.waitFor('setMessageReaction');
    expect(reaction.body).toEqual({ chat_id: GROUP, message_id: asked.message.message_id, reaction: [{ type: 'emoji', emoji: '👀' }] });
    expect(reaction.at).toBeLessThanOrEqual(reply.at);
    expect(reactions()).toHaveLength(1); // nothing on the message kept as context
  });

  it('puts none on a direct message by default', async () => {
    gw = await start();
    telegram.pushUpdate(dm('hello there'));
    await replyIn(42, 'hello there');
    // A group turn after it reacts: by then a reaction of the DM's turn would have been sent long before.
    telegram.pushUpdate(groupMessage(GROUP, `${MENTION} and here?`));
    await replyIn(GROUP, 'and here?');
    await telegram.waitFor('setMessageReaction');
    expect(reactions().map((r) => r.chat_id)).toEqual([GROUP]);
  });

  it('"" turns it off', async () => {
    gw = await start({ ackReaction: '' });
    telegram.pushUpdate(groupMessage(GROUP, `${MENTION} anyone?`));
    await replyIn(GROUP, 'anyone?');
    expect(reactions()).toEqual([]);
  });

  it('per chat type: { direct, group } reacts in direct messages too, each with its own emoji', async () => {
    gw = await start({ ackReaction: { direct: '👍', group: '🔥' } });
    const hello = dm('hi bot');
    telegram.pushUpdate(hello);
    await replyIn(42, 'hi bot');
    expect((await telegram.waitFor('setMessageReaction')).body).toEqual({ chat_id: 42, message_id: hello.message.message_id, reaction: [{ type: 'emoji', emoji: '👍' }] });
    telegram.pushUpdate(groupMessage(GROUP, `${MENTION} in the group`));
    const group = await telegram.waitFor('setMessageReaction', (c) => c.body.chat_id === GROUP);
    expect(group.body.reaction).toEqual([{ type: 'emoji', emoji: '🔥' }]);
  });

  it('a refused reaction does not fail the turn', async () => {
    gw = await start();
    telegram.failNext('setMessageReaction', { error_code: 400, description: 'Bad Request: REACTION_INVALID' });
    telegram.pushUpdate(groupMessage(GROUP, `${MENTION} still there?`));
    const reply = await replyIn(GROUP, 'still there?');
    expect(reply.body.text).toBe(`re: ${MENTION} still there?`);
    expect(telegram.callsOf('setMessageReaction').map((c) => c.response.ok)).toEqual([false]); // a 400 is not tried again
  });

  it('writes emoji as Telegram lists them (no variation selector)', () => {
    expect(telegramReactionEmoji('❤️')).toBe('❤');
    expect(telegramReactionEmoji('👀')).toBe('👀');
  });
});
