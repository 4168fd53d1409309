import { Writable } from 'node:stream';
import type { Update } from 'grammy/types';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeUpdate } from '../../../channels/telegram/normalize.ts';
import { createLogger } from '../../../src/core/logger.ts';
import { processGuardStats } from '../../../src/core/process-guard.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { startFakeDiscord, type FakeDiscord } from '../../fakes/fake-discord.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { junk, mutated } from '../../helpers/mutations.ts';
import { startTelegramGateway } from './harness.ts';
import { ALICE, BOT, dm, groupMessage, topicMessage } from './updates.ts';

const SECRET = 'fuzz-secret_123';
const MALLORY = { id: 77, is_bot: false, first_name: 'Mallory', username: 'mallory' };

/** Well-formed updates of every shape the channel reads; the fuzzer breaks them. */
const TEMPLATES: Record<string, unknown>[] = [
  dm('hello there', { from: MALLORY }),
  dm('look', { from: MALLORY, extra: { photo: [{ file_id: 'p1', file_unique_id: 'u1', width: 10, height: 10, file_size: 100 }], caption: 'a photo', text: undefined } }),
  dm('/status', { from: MALLORY }),
  groupMessage(-100_500, `@${BOT.username} hi`, { from: MALLORY }),
  groupMessage(-100_500, 'a reply', { from: MALLORY, extra: { reply_to_message: { message_id: 3, date: 1, chat: { id: -100_500, type: 'group' }, from: BOT, text: 'earlier' } } }),
  topicMessage(-1_000_000_000_500, 7, 'in a topic', { from: MALLORY }),
  { edited_message: dm('edited', { from: MALLORY }).message },
  { channel_post: { message_id: 1, date: 1, chat: { id: -100_600, type: 'channel' }, text: 'post' } },
  { callback_query: { id: 'q', from: MALLORY, chat_instance: 'c', data: 'x' } },
];
const update = fc.oneof(
  { weight: 9, arbitrary: fc.constantFrom(...TEMPLATES).chain((t) => mutated(t)) },
  { weight: 1, arbitrary: fc.dictionary(fc.constantFrom('message', 'edited_message', 'channel_post', 'my_chat_member', 'x'), junk, { maxKeys: 2 }) },
);
/** An update id as a broken Bot API (or a proxy in front of it) might send it; valid ones stay below the probes'. */
const updateId = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 999_999 }) },
  { weight: 4, arbitrary: fc.constantFrom(null, undefined, '', '7', 'x', 1.5, -1, 1e300, true, {}, [], [3]) },
);
/** One entry of a getUpdates result: an update (maybe broken) with an id (maybe broken), or not an update at all. */
const entry = fc.oneof(
  { weight: 8, arbitrary: fc.tuple(update, updateId).map(([u, id]) => (u && typeof u === 'object' && !Array.isArray(u) ? { ...u, update_id: id } : u)) },
  { weight: 2, arbitrary: junk },
);
/** A whole getUpdates result: a list of entries, or something else. */
const batchResult = fc.oneof(
  { weight: 7, arbitrary: fc.array(entry, { maxLength: 5 }) },
  { weight: 3, arbitrary: junk },
);

/** A key segment or id must never be made of an absent value. */
const BAD_ID = /undefined|null|NaN|\[object/;

describe('telegram intake under malformed updates', () => {
  it('refuses at the edge any update whose ids a key needs are missing or of the wrong type (property)', () => {
    const context = { accountId: 'default', bot: { id: BOT.id, username: BOT.username }, now: 1 };
    fc.assert(fc.property(update, fc.integer({ min: 1, max: 1e6 }), (u, updateId) => {
      const result = normalizeUpdate({ update_id: updateId, ...(u as object) }, context);
      if ('ignored' in result) return;
      const m = result.message;
      for (const id of [m.id, m.chatId, m.peerId, m.sender.id, m.groupId ?? 'x', m.threadId ?? 'x', m.deliveryId ?? 'x']) {
        expect(typeof id).toBe('string');
        expect(id).not.toMatch(BAD_ID);
        expect(id.length).toBeGreaterThan(0);
      }
      expect(typeof m.text).toBe('string');
    }), { numRuns: 3000, seed: 16_003 });
  });

  it('a chat without an id is refused, not keyed as "undefined"', () => {
    const context = { accountId: 'default', bot: { id: BOT.id, username: BOT.username }, now: 1 };
    const u = dm('hello');
    const result = normalizeUpdate({ update_id: 1, message: { ...u.message, chat: { type: 'private' } } } as unknown as Update, context);
    expect(result).toEqual({ ignored: 'malformed message: no chat id' });
  });

  describe('through the whole gateway', () => {
    let telegram: FakeTelegram;
    let tmp: ReturnType<typeof tempDir>;
    let gw: RunningGateway;
    const lines: Record<string, unknown>[] = [];
    const guardBefore = { ...processGuardStats };
    let probes = 0;

    beforeAll(async () => {
      telegram = await startFakeTelegram();
      tmp = tempDir('switchboard-telegram-fuzz-');
      const logger = createLogger({ level: 'warn', destination: new Writable({ write(c, _e, done) { lines.push(JSON.parse(String(c)) as Record<string, unknown>); done(); } }) });
      gw = await startTelegramGateway({
        dir: tmp.dir, telegram, logger,
        config: { channels: { telegram: { mode: 'webhook', webhookSecret: SECRET, dmPolicy: 'allowlist', allowFrom: [String(ALICE.id)] } } },
      });
    });
    afterAll(async () => {
      await gw?.stop();
      await telegram?.close();
      tmp?.remove();
    });

    const post = (body: string) => fetch(`${gw.url}/webhooks/telegram/default`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'X-Telegram-Bot-Api-Secret-Token': SECRET }, body,
    });

    async function probe(): Promise<void> {
      const text = `probe ${++probes}`;
      expect((await post(JSON.stringify({ update_id: 900_000 + probes, ...dm(text) }))).status).toBe(200);
      await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes(`You said: "${text}"`), 10_000);
    }

    it('answers a signed body that is not an update with 400 and a log line, never 5xx', async () => {
      for (const body of ['null', '[]', '"text"', '42', '{}', '{"update_id":"1"}', '{"update_id":-1}', 'not json']) {
        const response = await post(body);
        expect(response.status, body).toBe(400);
      }
      expect(lines.filter((l) => l.msg === 'Telegram webhook: refused a body that is not an update (400)')).toHaveLength(8);
      await probe();
    });

    it('takes thousands of malformed updates without a 5xx or a crash, and still answers, as does the web chat', async () => {
      let n = 0;
      const statuses = new Map<number, number>();
      await fc.assert(fc.asyncProperty(fc.array(update, { minLength: 100, maxLength: 100 }), async (batch) => {
        for (const u of batch) {
          const response = await post(JSON.stringify({ update_id: 1000 + n++, ...(u as object) }));
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          expect(response.status).toBeLessThan(500);
          await response.arrayBuffer();
        }
        await probe();
      }), { numRuns: 15, seed: 16_004, endOnFailure: true });
      expect(n).toBe(1500);
      const web = await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'web', text: 'still there?' }) });
      expect(web.status).toBe(200);
      expect(gw.adapters.find((a) => a.id === 'telegram')!.status).toBe('running');
      expect(processGuardStats).toEqual(guardBefore);
      expect(lines.filter((l) => l.msg === 'Telegram update could not be handled; skipped')).toEqual([]);
    }, 120_000);
  });

  describe('through long polling (the default mode)', () => {
    let telegram: FakeTelegram;
    let discord: FakeDiscord;
    let tmp: ReturnType<typeof tempDir>;
    let gw: RunningGateway;
    const lines: Record<string, unknown>[] = [];
    const guardBefore = { ...processGuardStats };
    let probes = 0;

    beforeAll(async () => {
      telegram = await startFakeTelegram();
      discord = await startFakeDiscord({ bot: { id: '2000000000000000001', username: 'switchboard', bot: true } });
      tmp = tempDir('switchboard-telegram-poll-fuzz-');
      const logger = createLogger({ level: 'warn', destination: new Writable({ write(c, _e, done) { lines.push(JSON.parse(String(c)) as Record<string, unknown>); done(); } }) });
      gw = await startTelegramGateway({
        dir: tmp.dir, telegram, logger,
        // Garbage batches back off (1 s doubling in production); here the waits are 1 ms, 2 ms, … 8 ms.
        pollBackoff: { baseMs: 1, maxMs: 8 },
        env: { DISCORD_BOT_TOKEN: discord.token, DISCORD_API_BASE: discord.api },
        config: { channels: { telegram: { dmPolicy: 'allowlist', allowFrom: [String(ALICE.id)] }, discord: { dmPolicy: 'open' } } },
      });
    });
    afterAll(async () => {
      await gw?.stop();
      await telegram?.close();
      await discord?.close();
      tmp?.remove();
    });

    /** A valid update after the poison is still answered (ids above any the fuzzer makes). */
    async function probe(): Promise<void> {
      const text = `probe ${++probes}`;
      telegram.pushUpdate({ update_id: 1_000_000 + probes, ...dm(text) });
      await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes(`You said: "${text}"`), 10_000);
    }

    it('drops a result that is not a list, null entries and entries without an integer update_id, and moves the offset past them', async () => {
      const before = telegram.callsOf('getUpdates').length;
      for (const result of [null, 'x', {}, 7, [null], [{ message: dm('no id').message }], [{ update_id: 'x', ...dm('string id') }], [{ update_id: 1.5 }], [[1]]]) telegram.pushRawResult(result);
      await probe();
      // One warning per run of unreadable batches (the rest at debug): the run is broken once, by [{ update_id: 1.5 }],
      // whose id can still be read (1, past offset 0), so the three warnings are the run's start, that batch, the next run.
      const dropped = lines.filter((l) => l.msg === 'Telegram getUpdates: dropped malformed updates; polling goes on');
      expect(dropped.map((l) => l.streak)).toEqual([1, 1, 1]);
      // No NaN offset: every later getUpdates asks for an integer offset.
      const offsets = telegram.callsOf('getUpdates').slice(before).map((c) => c.body.offset);
      expect(offsets.every((o) => o === undefined || Number.isSafeInteger(o))).toBe(true);
      expect(gw.adapters.find((a) => a.id === 'telegram')!.status).toBe('running');
    });

    it('takes thousands of generated getUpdates results without stopping, still answers, as do the web chat and Discord', async () => {
      let n = 0;
      await fc.assert(fc.asyncProperty(fc.array(batchResult, { minLength: 50, maxLength: 50 }), async (batch) => {
        for (const result of batch) {
          telegram.pushRawResult(result);
          n++;
        }
        await probe();
      }), { numRuns: 40, seed: 16_007, endOnFailure: true });
      expect(n).toBe(2000);
      expect(gw.adapters.find((a) => a.id === 'telegram')!.status).toBe('running');
      expect(lines.filter((l) => /Telegram polling stopped/.test(String(l.msg)))).toEqual([]);
      expect(processGuardStats).toEqual(guardBefore);
      const web = await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'web', text: 'still there?' }) });
      expect(web.status).toBe(200);
      discord.message({ channel_id: '3000000000000000042', content: 'discord still there?' });
      await discord.waitForCall((c) => c.method === 'POST' && c.status === 200 && c.path === '/api/v10/channels/3000000000000000042/messages' && String(c.body?.content).includes('discord still there?'), 10_000);
    }, 180_000);
  });
});
