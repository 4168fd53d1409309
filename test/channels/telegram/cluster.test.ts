import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramChannel } from '../../../channels/telegram/index.ts';
import { SECRET_HEADER } from '../../../channels/telegram/webhook-route.ts';
import { PgChannelLeases } from '../../../src/cluster/leader-lease.ts';
import type { TelegramAccountConfig } from '../../../src/config/resolved.ts';
import type { ChannelAdapter, InboundSink, Submission } from '../../../src/core/channel-adapter.ts';
import type { ChannelCluster } from '../../../src/core/channel-leases.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { ChannelError } from '../../../src/core/errors.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import type { InboundMessage } from '../../../src/core/message.ts';
import { FakeLeases, fakeCluster, MemoryWatermarks } from '../../fakes/fake-leases.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { ManualTimers } from '../../helpers/manual-timers.ts';
import { describePg, useTestDatabase } from '../../helpers/postgres.ts';
import { until } from '../../helpers/wait.ts';
import { dm } from './updates.ts';

const SECRET = 'webhook-secret_123';
const POLLER = 'telegram:default:poller';

/** A sink whose answers the test gives (or that accepts at once), recording what it got. */
function recordingSink(mode: 'accept' | 'hold' = 'accept') {
  const calls: { message: InboundMessage; resolve: () => void; reject: (e: unknown) => void }[] = [];
  const sink: InboundSink = (message) => new Promise<Submission>((resolve, reject) => {
    const answer = () => resolve({ status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) });
    calls.push({ message, resolve: answer, reject });
    if (mode === 'accept') answer();
  });
  return { sink, calls, texts: () => calls.map((c) => c.message.text) };
}

describe('Telegram in cluster mode', () => {
  let telegram: FakeTelegram;
  const adapters: ChannelAdapter[] = [];
  beforeEach(async () => {
    telegram = await startFakeTelegram({ maxPollMs: 200 });
  });
  afterEach(async () => {
    await Promise.all(adapters.splice(0).map((a) => a.stop()));
    await telegram.close();
  });

  const account = (mode: 'polling' | 'webhook'): TelegramAccountConfig => ({
    accountId: 'default', enabled: true, dmPolicy: 'open', allowFrom: [], groupPolicy: 'allowlist', groups: [], requireMention: true,
    botToken: telegram.token, apiRoot: telegram.apiRoot, mode, webhookSecret: SECRET,
  });
  const adapter = (mode: 'polling' | 'webhook', extra: { cluster?: ChannelCluster; timers?: ManualTimers; conflictRetryMs?: number } = {}) => {
    const a = createTelegramChannel({ account: account(mode), clock: systemClock, logger: silentLogger(), stateDir: '/nonexistent', webhookTimeoutMs: 10_000, ...extra });
    adapters.push(a);
    return a;
  };

  describe('webhook mode answers 200 only once the update was taken', () => {
    const post = (a: ChannelAdapter, update: Record<string, unknown>) => a.routes!()[0]!.handle(
      new Request('http://gateway/webhooks/telegram/default', { method: 'POST', headers: { [SECRET_HEADER]: SECRET, 'content-type': 'application/json' }, body: JSON.stringify(update) }),
      {}, { correlationId: 'corr' },
    );

    it('answers 500 when the gateway could not take the update, 503 when it did not in time, 200 when it did', async () => {
      const timers = new ManualTimers();
      const a = adapter('webhook', { timers });
      const { sink, calls } = recordingSink('hold');
      await a.start(sink);

      const failed = post(a, { update_id: 1, ...dm('the commit fails') });
      await until(() => calls.length === 1, 'the first handover');
      calls[0]!.reject(new ChannelError('CLUSTER_STORE', 'commit failed'));
      expect((await failed).status).toBe(500);

      const slow = post(a, { update_id: 2, ...dm('the commit hangs') });
      await until(() => calls.length === 2, 'the second handover');
      expect(timers.delays()).toEqual([10_000]);
      timers.advance(10_000);
      const late = await slow;
      expect(late.status).toBe(503);
      expect(((await late.json()) as { error: { code: string } }).error.code).toBe('timeout');

      const ok = post(a, { update_id: 3, ...dm('the commit works') });
      await until(() => calls.length === 3, 'the third handover');
      calls[2]!.resolve();
      expect((await ok).status).toBe(200);
      expect(timers.delays()).toEqual([]);
    });

    it('still acknowledges (200) an update that can never be taken (malformed), as on one machine', async () => {
      const a = adapter('webhook');
      const { sink, calls } = recordingSink();
      await a.start(sink);
      const answer = await post(a, { update_id: 9, message: { message_id: 1, date: 1, chat: { id: 'not-a-number', type: 'private' }, text: 'x' } });
      expect(answer.status).toBe(200);
      expect(calls).toHaveLength(0);
    });
  });

  describe('polling mode: one elected poller per bot', () => {
    it('only the lease holder polls; the other takes over when the holder\'s lease ends', async () => {
      const leases = new FakeLeases();
      const marks = new MemoryWatermarks();
      const a = adapter('polling', { cluster: fakeCluster(leases, 'A', marks) });
      const b = adapter('polling', { cluster: fakeCluster(leases, 'B', marks) });
      const sinkA = recordingSink();
      const sinkB = recordingSink();
      await a.start(sinkA.sink);
      await b.start(sinkB.sink);
      expect(leases.holder(POLLER)).toBe('A');
      await until(() => a.status === 'running', 'A to poll');
      expect(b.status).toBe('standby');

      telegram.pushUpdate(dm('one'));
      await until(() => sinkA.calls.length === 1, 'A to take the first update');
      // B sends replies all the same (REST, any replica).
      await b.send({ channel: 'telegram', accountId: 'default', chatId: '42', chatType: 'direct' }, { text: 'from the standby' });
      expect(telegram.callsOf('sendMessage').at(-1)?.body.text).toBe('from the standby');

      leases.end(POLLER); // A dies (its lease connection ended)
      expect(leases.holder(POLLER)).toBe('B');
      expect(a.status).toBe('standby');
      await until(() => b.status === 'running', 'B to poll');
      telegram.pushUpdate(dm('two'));
      await until(() => sinkB.texts().includes('two'), 'B to take the second update');
      expect(sinkA.texts()).toEqual(['one']);
      expect(sinkB.texts()).not.toContain('one');
      expect(telegram.conflicts).toBe(0);
    });

    it('an update in flight when the lease is lost is not confirmed: the new poller gets it again (the dedupe drops it)', async () => {
      const leases = new FakeLeases();
      const marks = new MemoryWatermarks();
      const a = adapter('polling', { cluster: fakeCluster(leases, 'A', marks) });
      const b = adapter('polling', { cluster: fakeCluster(leases, 'B', marks) });
      const sinkA = recordingSink('hold');
      const sinkB = recordingSink();
      await a.start(sinkA.sink);
      await b.start(sinkB.sink);
      telegram.pushUpdate(dm('in flight'));
      await until(() => sinkA.calls.length === 1, 'A to be handing it over');
      leases.end(POLLER);
      await until(() => sinkB.texts().includes('in flight'), 'B to get it again');
      sinkA.calls[0]!.resolve(); // A's commit lands late: a duplicate the delivery-id dedupe drops
      telegram.pushUpdate(dm('after'));
      await until(() => sinkB.texts().includes('after'), 'B to go on');
      expect(sinkA.texts()).toEqual(['in flight']);
      expect(telegram.conflicts).toBe(0);
    });

    it('a 409 from another getUpdates consumer makes the holder poll again, keeping the lease', async () => {
      const leases = new FakeLeases();
      const a = adapter('polling', { cluster: fakeCluster(leases, 'A', new MemoryWatermarks()), conflictRetryMs: 0 });
      const b = adapter('polling', { cluster: fakeCluster(leases, 'B', new MemoryWatermarks()) });
      const sinkA = recordingSink();
      await a.start(sinkA.sink);
      await b.start(recordingSink().sink);
      await until(() => telegram.callsOf('getUpdates').length >= 1, 'A to poll');
      const polls = telegram.callsOf('getUpdates').length;
      telegram.failNext('getUpdates', { error_code: 409, description: 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running' });
      telegram.pushUpdate(dm('wake the long poll')); // ends the current long poll, so the next one meets the 409
      await until(() => telegram.callsOf('getUpdates').some((c, i) => i >= polls && c.response.error_code === 409), 'the 409');
      telegram.pushUpdate(dm('after the conflict'));
      await until(() => sinkA.texts().includes('after the conflict'), 'A to poll again');
      expect(leases.holder(POLLER)).toBe('A');
      expect(b.status).toBe('standby');
    });

    it('an update the gateway could not take ends the term unconfirmed and gives the lease up; it is taken on the next term', async () => {
      const leases = new FakeLeases();
      const a = adapter('polling', { cluster: fakeCluster(leases, 'A', new MemoryWatermarks()) });
      const sinkA = recordingSink('hold');
      await a.start(sinkA.sink);
      telegram.pushUpdate(dm('first try fails'));
      await until(() => sinkA.calls.length === 1, 'the first try');
      sinkA.calls[0]!.reject(new ChannelError('CLUSTER_STORE', 'PostgreSQL is down'));
      // Alone in the cluster, A wins the lease again at once (the fake has no poll delay) and polls anew.
      await until(() => sinkA.calls.length === 2, 'the second try');
      expect(sinkA.calls[1]!.message.text).toBe('first try fails');
      sinkA.calls[1]!.resolve();
      await until(() => a.status === 'running', 'A to poll on');
    });
  });
});

const db = useTestDatabase();

describePg('Telegram elected poller on PostgreSQL leases', () => {
  let telegram: FakeTelegram;
  const adapters: ChannelAdapter[] = [];
  const clusters: PgChannelLeases[] = [];
  beforeEach(async () => {
    telegram = await startFakeTelegram({ maxPollMs: 200 });
  });
  afterEach(async () => {
    await Promise.all(adapters.splice(0).map((a) => a.stop()));
    await Promise.all(clusters.splice(0).map((c) => c.close()));
    await telegram.close();
  });

  it('two replicas: one polls, the other takes over when the first one\'s lease connection ends', async () => {
    const replica = (name: string) => {
      const timers = new ManualTimers();
      const leases = new PgChannelLeases({ uri: db.uri, leaseMs: 30_000, pollMs: 500, logger: silentLogger(), timers });
      clusters.push(leases);
      const sink = recordingSink();
      const a = createTelegramChannel({
        account: {
          accountId: 'default', enabled: true, dmPolicy: 'open', allowFrom: [], groupPolicy: 'allowlist', groups: [], requireMention: true,
          botToken: telegram.token, apiRoot: telegram.apiRoot, mode: 'polling', webhookSecret: '',
        },
        clock: systemClock, logger: silentLogger().child({ replica: name }), stateDir: '/nonexistent',
        cluster: { leases, watermarks: new MemoryWatermarks() },
      });
      adapters.push(a);
      return { adapter: a, sink, timers };
    };
    const one = replica('one');
    const two = replica('two');
    await one.adapter.start(one.sink.sink);
    await two.adapter.start(two.sink.sink);
    await until(() => one.adapter.status === 'running', 'one to poll');
    expect(two.adapter.status).toBe('standby');
    telegram.pushUpdate(dm('to one'));
    await until(() => one.sink.texts().includes('to one'), 'one to take it');

    // One's lease connection ends (a dead or frozen replica): PostgreSQL frees the lock; two's next try wins.
    const { rows } = await db.pool.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock%' ORDER BY backend_start LIMIT 1",
    );
    await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    await until(() => one.adapter.status === 'standby', 'one to stand by');
    two.timers.advance(500);
    await until(() => two.adapter.status === 'running', 'two to poll');
    telegram.pushUpdate(dm('to two'));
    await until(() => two.sink.texts().includes('to two'), 'two to take it');
    expect(one.sink.texts()).toEqual(['to one']);
    expect(telegram.conflicts).toBe(0);
  });
});
