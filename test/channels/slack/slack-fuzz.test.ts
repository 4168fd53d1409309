import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeSlackEvent, type SlackMessageEvent } from '../../../channels/slack/normalize.ts';
import { processGuardStats } from '../../../src/core/process-guard.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { channelMessageEvent, dmEvent, eventCallback, mentionEvent, slackSignedHeaders, startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { startTestGateway, tempDir } from '../../helpers/gateway.ts';
import { junk, mutated } from '../../helpers/mutations.ts';
import { APP_TOKEN, BOT_TOKEN, capturingLogger, postSlack, SIGNING_SECRET } from './helpers.ts';

/** Events of every shape the channel reads, from someone not allowed to start a session; the fuzzer breaks them. */
const EVENTS: Record<string, unknown>[] = [
  dmEvent('hello there', { user: 'U666', channel: 'D666' }),
  mentionEvent('hi bot', { user: 'U666', channel: 'C666' }),
  channelMessageEvent('chatter', { user: 'U666', channel: 'C666', threadTs: '1700000000.000001' }),
  { ...dmEvent('a file', { user: 'U666', channel: 'D666' }), subtype: 'file_share', files: [{ id: 'F1', name: 'a.png', mimetype: 'image/png', size: 3 }] },
  { ...dmEvent('edited', { user: 'U666', channel: 'D666' }), subtype: 'message_changed', message: { text: 'x' } },
  { ...dmEvent('from a bot', { user: 'U666', channel: 'D666' }), bot_id: 'B9', user_profile: { display_name: 'Bot', real_name: 'A Bot' } },
];
const event = fc.constantFrom(...EVENTS).chain((e) => mutated(e));
/** A whole envelope: a broken event inside a well-formed callback, or the callback itself broken. */
const envelope = fc.oneof(
  { weight: 6, arbitrary: event.map((e) => eventCallback(e as Record<string, unknown>)) },
  { weight: 3, arbitrary: fc.constantFrom(...EVENTS).chain((e) => mutated(eventCallback(e))) },
  { weight: 1, arbitrary: junk },
);
const BAD_ID = /undefined|null|NaN|\[object/;

/** Names the Socket Mode client uses for its own state and plumbing: never an envelope's or event's type. */
const RESERVED = ['connected', 'disconnected', 'connecting', 'reconnecting', 'disconnecting', 'authenticated', 'error', 'slack_event', 'ws_message', 'outgoing_message'];
const SLASH = { command: '/status', text: '', user_id: 'U666', channel_id: 'D666', team_id: 'T1', trigger_id: 't', response_url: 'http://127.0.0.1:9/x' };
const INTERACTIVE = { type: 'block_actions', user: { id: 'U666' }, team: { id: 'T1' }, actions: [{ action_id: 'a', type: 'button', value: 'v' }], trigger_id: 't' };
/** Any Socket Mode frame but `disconnect` (which really asks for a reconnect; tested on its own). */
const socketFrame = fc.record({
  type: fc.oneof(fc.constantFrom('events_api', 'slash_commands', 'interactive', 'hello', 'nonsense', '', ...RESERVED), fc.string({ maxLength: 10 }).filter((t) => t !== 'disconnect')),
  envelope_id: fc.oneof(fc.uuid(), junk),
  payload: fc.oneof(fc.constant(null), junk, mutated(SLASH), mutated(INTERACTIVE), fc.constantFrom(...EVENTS).chain((e) => mutated(eventCallback(e))),
    fc.constantFrom(...RESERVED).map((type) => eventCallback({ ...EVENTS[0], type }))),
  accepts_response_payload: fc.oneof(fc.boolean(), junk),
}, { requiredKeys: ['type'] });

const webchat = (gw: RunningGateway) => fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'web', text: 'still there?' }) });

describe('slack intake under malformed envelopes and events', () => {
  it('refuses at the edge any event whose ids a key needs are missing or of the wrong type (property)', () => {
    fc.assert(fc.property(event, fc.oneof(fc.constant({ event_id: 'Ev1', team_id: 'T1' }), junk), (e, env) => {
      const result = normalizeSlackEvent({
        event: e as SlackMessageEvent, envelope: (env ?? {}), accountId: 'default', bot: { userId: 'UBOT', botId: 'BBOT', teamId: 'T1' }, receivedAt: 1,
      });
      if (result.kind === 'ignored') return;
      const m = result.message;
      for (const id of [m.id, m.chatId, m.peerId, m.sender.id, m.groupId ?? 'x', m.threadId ?? 'x', m.deliveryId ?? 'x', ...(m.containerIds ?? [])]) {
        expect(typeof id).toBe('string');
        expect(id).not.toMatch(BAD_ID);
      }
      expect(typeof m.text).toBe('string');
    }), { numRuns: 3000, seed: 16_005 });
  });

  describe('HTTP mode (signed requests)', () => {
    let slack: FakeSlack;
    let tmp: ReturnType<typeof tempDir>;
    let gw: RunningGateway;
    const log = capturingLogger();
    const guardBefore = { ...processGuardStats };
    let probes = 0;

    beforeAll(async () => {
      slack = await startFakeSlack();
      tmp = tempDir('switchboard-slack-fuzz-');
      gw = await startTestGateway({
        dir: tmp.dir, logger: log.logger,
        env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: slack.apiUrl },
        config: { channels: { slack: { mode: 'http', dmPolicy: 'allowlist', allowFrom: ['U42'], channels: ['C777'] } } },
      });
    });
    afterAll(async () => {
      await gw?.stop();
      await slack?.close();
      tmp?.remove();
    });

    async function probe(): Promise<void> {
      const text = `probe ${++probes}`;
      expect((await postSlack(gw, eventCallback(dmEvent(text)))).status).toBe(200);
      await slack.waitFor('chat.postMessage', (c) => String(c.body.text).includes(`"${text}"`), 10_000);
    }

    const postRaw = (raw: string, contentType: string) => fetch(`${gw.url}/webhooks/slack/default`, {
      method: 'POST', headers: { ...slackSignedHeaders(SIGNING_SECRET, raw), 'content-type': contentType }, body: raw,
    });

    it('answers signed bodies that are not payloads with 400 and a log line, never 5xx', async () => {
      const cases: [string, string][] = [
        ['payload=null', 'application/x-www-form-urlencoded'], ['payload=%5B%5D', 'application/x-www-form-urlencoded'], ['payload=%7Bnot', 'application/x-www-form-urlencoded'],
        ['null', 'application/json'], ['[]', 'application/json'], ['"x"', 'application/json'], ['{', 'application/json'],
        ['{"type":"event_callback"}', 'application/json'], ['{"type":"event_callback","event":null}', 'application/json'], ['{"type":7}', 'application/json'],
      ];
      for (const [raw, type] of cases) expect((await postRaw(raw, type)).status, raw).toBe(400);
      expect(log.lines().filter((l) => l.msg === 'slack: refused a signed request whose body is not a Slack payload (400)')).toHaveLength(cases.length);
      await probe();
    });

    it('takes thousands of malformed events without a 5xx or a crash, and still answers, as does the web chat', async () => {
      let n = 0;
      await fc.assert(fc.asyncProperty(fc.array(envelope, { minLength: 100, maxLength: 100 }), async (batch) => {
        for (const body of batch) {
          const response = await postSlack(gw, body ?? null);
          n++;
          expect(response.status, JSON.stringify(body)).toBeLessThan(500);
          await response.arrayBuffer();
        }
        await probe();
      }), { numRuns: 10, seed: 16_006, endOnFailure: true });
      expect(n).toBe(1000);
      expect((await webchat(gw)).status).toBe(200);
      expect(gw.adapters.find((a) => a.id === 'slack')!.status).toBe('running');
      expect(processGuardStats).toEqual(guardBefore);
      expect(log.lines().filter((l) => /shutting down/.test(String(l.msg)))).toEqual([]);
    }, 120_000);
  });

  describe('Socket Mode (envelopes)', () => {
    let slack: FakeSlack;
    let telegram: FakeTelegram;
    let tmp: ReturnType<typeof tempDir>;
    let gw: RunningGateway;
    const log = capturingLogger();
    const guardBefore = { ...processGuardStats };
    let probes = 0;

    beforeAll(async () => {
      slack = await startFakeSlack({ appToken: APP_TOKEN });
      telegram = await startFakeTelegram();
      tmp = tempDir('switchboard-slack-socket-fuzz-');
      gw = await startTestGateway({
        dir: tmp.dir, logger: log.logger,
        env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_APP_TOKEN: APP_TOKEN, SLACK_API_URL: slack.apiUrl, TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot },
        config: { channels: { slack: { dmPolicy: 'allowlist', allowFrom: ['U42'], channels: ['C777'] }, telegram: { dmPolicy: 'open' } } },
      });
      await slack.waitForSocket();
    });
    afterAll(async () => {
      await gw?.stop();
      await slack?.close();
      await telegram?.close();
      tmp?.remove();
    });

    /** The web chat and another platform channel (Telegram, polling) still answer. */
    async function othersAnswer(): Promise<void> {
      expect((await webchat(gw)).status).toBe(200);
      const text = `telegram probe ${++probes}`;
      telegram.pushUpdate({ message: { message_id: probes, date: 1, chat: { id: 4242, type: 'private' }, from: { id: 4242, is_bot: false, first_name: 'Tom' }, text } });
      await telegram.waitFor('sendMessage', (c) => String(c.body.text).includes(`You said: "${text}"`), 10_000);
    }

    async function probe(): Promise<void> {
      const text = `probe ${++probes}`;
      await slack.sendEnvelope(eventCallback(dmEvent(text)));
      await slack.waitFor('chat.postMessage', (c) => String(c.body.text).includes(`"${text}"`), 10_000);
    }

    it('survives raw frames and malformed envelopes, and still answers, as does the web chat', async () => {
      for (const raw of ['', 'not json', 'null', '[]', '{"type":"events_api"}', '{"type":"events_api","envelope_id":"e1","payload":null}', '{"type":"events_api","envelope_id":"e2","payload":{"event":7}}', '{"type":"hello"}', '{"type":"nonsense","envelope_id":5}']) {
        slack.sendRaw(raw);
      }
      await probe();
      let n = 0;
      await fc.assert(fc.asyncProperty(fc.array(envelope, { minLength: 50, maxLength: 50 }), async (batch) => {
        for (const payload of batch) {
          // A payload bolt cannot take (not an event) goes unacknowledged (Slack would retry it); it must not hurt anything.
          await slack.sendEnvelope((payload ?? null) as Record<string, unknown>, { timeoutMs: 250 }).catch(() => undefined);
          n++;
        }
        await probe();
      }), { numRuns: 8, seed: 16_007, endOnFailure: true });
      expect(n).toBe(400);
      await othersAnswer();
      expect(gw.adapters.find((a) => a.id === 'slack')!.status).toBe('running');
      expect(processGuardStats).toEqual(guardBefore);
    }, 120_000);

    it('refuses envelopes typed as the client\'s own state events ("connected", "disconnected", ...): no reconnect, no second connection', async () => {
      const frames = [
        ...RESERVED.map((type, i) => ({ type, envelope_id: `reserved-${i}`, payload: {} })),
        ...RESERVED.map((type, i) => ({ type: 'events_api', envelope_id: `reserved-event-${i}`, payload: eventCallback({ ...dmEvent('x'), type }) })),
      ];
      const seen = log.lines().length;
      for (const frame of frames) slack.sendRaw(JSON.stringify(frame));
      await probe();
      const lines = log.lines().slice(seen);
      expect(lines.filter((l) => l.msg === 'slack: dropped a malformed Socket Mode frame')).toHaveLength(frames.length);
      expect(lines.filter((l) => /Socket Mode connection lost|reconnect/.test(String(l.msg)))).toEqual([]);
      // Each refused envelope is acknowledged (Slack would send it again otherwise, as malformed).
      for (const frame of frames) expect(slack.acks).toContain(frame.envelope_id);
      expect(slack.sockets).toBe(1);
      expect(processGuardStats).toEqual(guardBefore);
    });

    it('takes thousands of frames of every envelope type (events_api, slash_commands, interactive, hello, unknown, reserved, null payloads), and still answers, as do the web chat and Telegram', async () => {
      let n = 0;
      await fc.assert(fc.asyncProperty(fc.array(socketFrame, { minLength: 100, maxLength: 100 }), async (batch) => {
        for (const frame of batch) {
          slack.sendRaw(JSON.stringify(frame));
          n++;
        }
        await probe();
      }), { numRuns: 20, seed: 16_008, endOnFailure: true });
      expect(n).toBe(2000);
      expect(slack.sockets).toBe(1);
      expect(log.lines().filter((l) => /Socket Mode connection lost/.test(String(l.msg)))).toEqual([]);
      await othersAnswer();
      expect(gw.adapters.find((a) => a.id === 'slack')!.status).toBe('running');
      expect(processGuardStats).toEqual(guardBefore);
    }, 120_000);

    it('reconnects once when Slack asks (disconnect), and answers again', async () => {
      await slack.disconnectSockets();
      await slack.waitForSocket(10_000);
      await probe();
      expect(slack.sockets).toBe(1);
    }, 30_000);
  });
});
