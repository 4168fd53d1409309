import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeSlackEvent, type SlackMessageEvent } from '../../../channels/slack/normalize.ts';
import { processGuardStats } from '../../../src/core/process-guard.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { channelMessageEvent, dmEvent, eventCallback, mentionEvent, slackSignedHeaders, startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
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
    let tmp: ReturnType<typeof tempDir>;
    let gw: RunningGateway;
    const guardBefore = { ...processGuardStats };
    let probes = 0;

    beforeAll(async () => {
      slack = await startFakeSlack({ appToken: APP_TOKEN });
      tmp = tempDir('switchboard-slack-socket-fuzz-');
      gw = await startTestGateway({
        dir: tmp.dir,
        env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_APP_TOKEN: APP_TOKEN, SLACK_API_URL: slack.apiUrl },
        config: { channels: { slack: { dmPolicy: 'allowlist', allowFrom: ['U42'], channels: ['C777'] } } },
      });
      await slack.waitForSocket();
    });
    afterAll(async () => {
      await gw?.stop();
      await slack?.close();
      tmp?.remove();
    });

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
      expect((await webchat(gw)).status).toBe(200);
      expect(gw.adapters.find((a) => a.id === 'slack')!.status).toBe('running');
      expect(processGuardStats).toEqual(guardBefore);
    }, 120_000);
  });
});
