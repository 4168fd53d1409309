import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSlackChannel } from '../../../channels/slack/index.ts';
import type { SlackAccountConfig } from '../../../src/config/resolved.ts';
import type { ChannelAdapter, InboundSink, Submission } from '../../../src/core/channel-adapter.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { ChannelError } from '../../../src/core/errors.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import type { InboundMessage } from '../../../src/core/message.ts';
import { dmEvent, eventCallback, slackSignedHeaders, startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { ManualTimers } from '../../helpers/manual-timers.ts';
import { APP_TOKEN, BOT_TOKEN, capturingLogger, SIGNING_SECRET, until } from './helpers.ts';

const accepted = (): Submission => ({ status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) });

/** A sink whose answers the test gives, one per call, in order. */
function scriptedSink() {
  const calls: { message: InboundMessage; resolve: () => void; reject: (e: unknown) => void }[] = [];
  const sink: InboundSink = (message) => new Promise<Submission>((resolve, reject) => {
    calls.push({ message, resolve: () => resolve(accepted()), reject });
  });
  return { sink, calls };
}

function account(slack: FakeSlack, mode: 'http' | 'socket'): SlackAccountConfig {
  return {
    accountId: 'default', enabled: true, dmPolicy: 'open', allowFrom: [], groupPolicy: 'open', groups: [], requireMention: true,
    botToken: BOT_TOKEN, appToken: APP_TOKEN, signingSecret: SIGNING_SECRET, apiUrl: slack.apiUrl, mode,
  };
}

describe('Slack acknowledges an event only once the gateway took (committed) it (SPEC §13)', () => {
  let slack: FakeSlack;
  let adapter: ChannelAdapter | undefined;

  beforeEach(async () => {
    slack = await startFakeSlack({ appToken: APP_TOKEN });
  });
  afterEach(async () => {
    await adapter?.stop();
    adapter = undefined;
    await slack.close();
  });

  describe('HTTP mode', () => {
    const timers = new ManualTimers();
    const post = (body: Record<string, unknown>, headers: Record<string, string> = {}) => {
      const raw = JSON.stringify(body);
      const request = new Request('http://gateway/webhooks/slack/default', { method: 'POST', headers: { ...slackSignedHeaders(SIGNING_SECRET, raw), ...headers }, body: raw });
      return adapter!.routes!()[0]!.handle(request, {}, { correlationId: 'corr' });
    };
    const start = async (sink: InboundSink) => {
      adapter = createSlackChannel({ account: account(slack, 'http'), clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', timers, ackDeadlineMs: 2500 });
      await adapter.start(sink);
    };

    it('answers 503 when the event is not taken by the deadline, and 200 to the retry once the original is taken (submitted once)', async () => {
      const { sink, calls } = scriptedSink();
      await start(sink);
      const body = eventCallback(dmEvent('slow commit'), { eventId: 'EvSLOW1' });
      const first = post(body);
      await until(() => calls.length === 1 && timers.delays().length > 0, 'the handover to start');
      expect(timers.delays()).toEqual([2500]);
      timers.advance(2499);
      let answered = false;
      void first.then(() => { answered = true; });
      await new Promise((resolve) => setImmediate(resolve));
      expect(answered).toBe(false);
      timers.advance(1);
      const late = await first;
      expect(late.status).toBe(503);
      expect(((await late.json()) as { error: { code: string } }).error.code).toBe('unavailable');

      // Slack retries at once (http_timeout); the retry waits for the original, which then commits.
      const retry = post(body, { 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' });
      await until(() => timers.delays().length > 0, 'the retry to wait');
      calls[0]!.resolve();
      const ok = await retry;
      expect(ok.status).toBe(200);
      expect(calls).toHaveLength(1);
    });

    it('answers 200 as soon as the event is taken, before the deadline', async () => {
      const { sink, calls } = scriptedSink();
      await start(sink);
      const answer = post(eventCallback(dmEvent('quick'), { eventId: 'EvQUICK' }));
      await until(() => calls.length === 1, 'the handover');
      calls[0]!.resolve();
      expect((await answer).status).toBe(200);
      expect(timers.delays()).toEqual([]);
    });

    it('processes a retry (X-Slack-Retry-Num) whose original never arrived, and a retry after a failed handover', async () => {
      const { sink, calls } = scriptedSink();
      await start(sink);
      const lost = post(eventCallback(dmEvent('only the retry got here'), { eventId: 'EvRETRY' }), { 'x-slack-retry-num': '2', 'x-slack-retry-reason': 'http_error' });
      await until(() => calls.length === 1, 'the retry to be submitted');
      calls[0]!.resolve();
      expect((await lost).status).toBe(200);

      const body = eventCallback(dmEvent('the database is down'), { eventId: 'EvFAIL' });
      const failed = post(body);
      await until(() => calls.length === 2, 'the second handover');
      calls[1]!.reject(new ChannelError('CLUSTER_STORE', 'commit failed'));
      expect((await failed).status).toBe(500);
      const again = post(body, { 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_error' });
      await until(() => calls.length === 3, 'the retry to be submitted again');
      calls[2]!.resolve();
      expect((await again).status).toBe(200);
    });
  });

  describe('Socket Mode', () => {
    it('acks an envelope only after its event was taken, and never one whose handover failed (Slack redelivers it)', async () => {
      const { sink, calls } = scriptedSink();
      const log = capturingLogger();
      adapter = createSlackChannel({ account: account(slack, 'socket'), clock: systemClock, logger: log.logger, stateDir: '/nonexistent' });
      await adapter.start(sink);
      await slack.waitForSocket();

      const slowAck = slack.sendEnvelope(eventCallback(dmEvent('slow'), { eventId: 'EvS1' }), { envelopeId: 'env-slow' });
      await until(() => calls.length === 1, 'the first handover');
      // A second envelope on the same socket is taken at once: its ack comes first (bolt alone would ack both on receipt).
      const quickAck = slack.sendEnvelope(eventCallback(dmEvent('quick', { channel: 'D999', user: 'U7' }), { eventId: 'EvS2' }), { envelopeId: 'env-quick' });
      await until(() => calls.length === 2, 'the second handover');
      calls[1]!.resolve();
      await quickAck;
      expect(slack.acks).toEqual(['env-quick']);
      calls[0]!.resolve();
      await slowAck;
      expect(slack.acks).toEqual(['env-quick', 'env-slow']);

      void slack.sendEnvelope(eventCallback(dmEvent('fails'), { eventId: 'EvS3' }), { envelopeId: 'env-failed', timeoutMs: 60_000 }).catch(() => undefined);
      await until(() => calls.length === 3, 'the third handover');
      calls[2]!.reject(new ChannelError('CLUSTER_STORE', 'commit failed'));
      await until(() => log.lines().some((l) => String(l.msg).includes('envelope not acknowledged')), 'the refusal to ack');
      expect(slack.acks).not.toContain('env-failed');

      // Slack sends it again (a new envelope, retry_attempt 1), maybe to another replica: taken and acked there.
      const redelivered = slack.sendEnvelope(eventCallback(dmEvent('fails'), { eventId: 'EvS3' }), { envelopeId: 'env-retry', retryAttempt: 1 });
      await until(() => calls.length === 4, 'the redelivery');
      calls[3]!.resolve();
      await redelivered;
      expect(slack.acks).toEqual(['env-quick', 'env-slow', 'env-retry']);
    });
  });
});
