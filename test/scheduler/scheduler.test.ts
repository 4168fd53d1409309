import { describe, expect, it } from 'vitest';
import type { InboundSink, Submission, TurnResult } from '../../src/core/channel-adapter.ts';
import type { Clock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { Scheduler } from '../../src/scheduler/scheduler.ts';
import { testConfig } from '../helpers/gateway.ts';
import { useTempDir } from '../helpers/fixtures.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { MemoryJobStore } from '../helpers/memory-job-store.ts';

/** A clock the test moves, with timers that fire when it does. */
class TestTime implements Clock {
  readonly timers = new ManualTimers();
  constructor(public at: number) {}
  now(): number { return this.at; }
  /** Moves to `to`, firing each timer that falls due on the way (in order). */
  async advanceTo(to: number, scheduler: Scheduler): Promise<void> {
    for (;;) {
      const next = this.timers.delays()[0];
      if (next === undefined || this.at + next > to) break;
      this.at += next;
      this.timers.advance(next);
      await scheduler.idle();
    }
    this.timers.advance(to - this.at);
    this.at = to;
    await scheduler.idle();
  }
}

/** A gateway intake that accepts each message id once (as the journal does) and answers at once. */
function recordingSink(answer = 'done'): { sink: InboundSink; messages: InboundMessage[] } {
  const seen = new Set<string>();
  const messages: InboundMessage[] = [];
  const sink: InboundSink = async (message) => {
    if (seen.has(message.id)) return { status: 'duplicate', correlationId: 'c', done: Promise.resolve(undefined) } satisfies Submission;
    seen.add(message.id);
    messages.push(message);
    const result = { replies: [{ text: answer }], outcome: 'replied' } as unknown as TurnResult;
    return { status: 'accepted', correlationId: 'c', done: Promise.resolve(result) };
  };
  return { sink, messages };
}

const BERLIN_8AM_DEC_2 = Date.UTC(2026, 11, 2, 7, 0); // 08:00 CET
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('Scheduler (SPEC §17)', () => {
  const tmp = useTempDir('switchboard-scheduler-');

  function make(jobs: unknown[], time: TestTime, store = new MemoryJobStore(), canDeliver: (channel: string, accountId: string) => boolean = () => true) {
    const config = testConfig(tmp.dir, { jobs });
    const { sink, messages } = recordingSink();
    const scheduler = new Scheduler({ config, store, clock: time, logger: silentLogger(), sink: () => sink, canDeliver, timers: time.timers });
    return { scheduler, messages, store };
  }
  const daily = { id: 'digest', schedule: '0 8 * * *', timezone: 'Europe/Berlin', prompt: 'summarize my notes', deliverTo: { channel: 'telegram', peer: '42' } };

  it('a daily cron job fires once per due time, as an internal job message to its chat, in its own session', async () => {
    const time = new TestTime(BERLIN_8AM_DEC_2 - 2 * HOUR);
    const { scheduler, messages, store } = make([daily], time);
    await scheduler.start();
    expect(messages).toHaveLength(0);
    await time.advanceTo(BERLIN_8AM_DEC_2 + 3 * DAY - HOUR, scheduler);
    expect(messages.map((m) => m.id)).toEqual([0, 1, 2].map((d) => `job:digest:${BERLIN_8AM_DEC_2 + d * DAY}`));
    const first = messages[0]!;
    expect(first.text).toBe('summarize my notes');
    expect(first.internal).toMatchObject({ kind: 'job', jobId: 'digest', sessionKey: 'agent:main:job:digest', runTokenBudget: 50_000,
      deliverTo: { channel: 'telegram', accountId: 'default', chatId: '42', chatType: 'direct' } });
    await new Promise((r) => setImmediate(r));
    expect((await store.stateOf('digest', time.now())).runs).toBe(3);
    expect((await store.stateOf('digest', time.now())).lastOutcome).toBe('delivered');
    scheduler.stop();
  });

  it('after downtime a missed run fires once at start, not once per missed slot', async () => {
    const store = new MemoryJobStore();
    store.states.set('digest', { jobId: 'digest', since: BERLIN_8AM_DEC_2 - DAY, lastDueAt: BERLIN_8AM_DEC_2 - DAY, runs: 1 });
    const time = new TestTime(BERLIN_8AM_DEC_2 + 3 * DAY + HOUR); // three due times were missed
    const { scheduler, messages } = make([daily], time, store);
    await scheduler.start();
    expect(messages.map((m) => m.id)).toEqual([`job:digest:${BERLIN_8AM_DEC_2 + 3 * DAY}`]);
    // Started again at once (a crash loop): nothing more.
    const again = make([daily], time, store);
    await again.scheduler.start();
    expect(again.messages).toHaveLength(0);
    scheduler.stop();
    again.scheduler.stop();
  });

  it('a new recurring job does not fire for slots before it was first seen', async () => {
    const time = new TestTime(BERLIN_8AM_DEC_2 + HOUR);
    const { scheduler, messages } = make([daily], time);
    await scheduler.start();
    expect(messages).toHaveLength(0);
    await time.advanceTo(BERLIN_8AM_DEC_2 + DAY, scheduler);
    expect(messages).toHaveLength(1);
    scheduler.stop();
  });

  it('a one-off time already past at start fires once if it never ran, and never again', async () => {
    const store = new MemoryJobStore();
    const once = { id: 'call-mum', schedule: '2026-12-01T17:00:00Z', prompt: 'remind me to call mum', deliverTo: { channel: 'telegram', peer: '42' } };
    const time = new TestTime(Date.UTC(2026, 11, 2, 9));
    const first = make([once], time, store);
    await first.scheduler.start();
    expect(first.messages.map((m) => m.id)).toEqual([`job:call-mum:${Date.UTC(2026, 11, 1, 17)}`]);
    first.scheduler.stop();
    const second = make([once], time, store);
    await second.scheduler.start();
    await time.advanceTo(time.now() + 30 * DAY, second.scheduler);
    expect(second.messages).toHaveLength(0);
    second.scheduler.stop();
  });

  it('a job whose chat is on a channel the gateway does not run is logged and counted, not run; the job stays', async () => {
    const time = new TestTime(BERLIN_8AM_DEC_2 - HOUR);
    const { scheduler, messages, store } = make([daily], time, new MemoryJobStore(), () => false);
    await scheduler.start();
    await time.advanceTo(BERLIN_8AM_DEC_2 + HOUR, scheduler);
    expect(messages).toHaveLength(0);
    expect(scheduler.runCounts.undeliverable).toBe(1);
    expect((await store.stateOf('digest', time.now())).lastOutcome).toBe('undeliverable');
    expect((await scheduler.list()).map((v) => v.job.id)).toEqual(['digest']);
    scheduler.stop();
  });

  it('jobs added at run time are checked: an invalid cron, one more often than scheduler.minIntervalSeconds, an unknown chat', async () => {
    const time = new TestTime(BERLIN_8AM_DEC_2);
    const { scheduler } = make([], time, new MemoryJobStore(), (channel) => channel === 'telegram');
    await scheduler.start();
    const target = { channel: 'telegram' as const, accountId: 'default', peer: '42' };
    await expect(scheduler.add({ schedule: 'every banana', prompt: 'x', deliverTo: target }, 'test')).rejects.toMatchObject({ code: 'SCHEDULE_INVALID' });
    await expect(scheduler.add({ schedule: '* * * * * *', prompt: 'x', deliverTo: target }, 'test')).rejects.toMatchObject({ code: 'SCHEDULE_TOO_FREQUENT' });
    await expect(scheduler.add({ schedule: 'every 30m', prompt: 'x', deliverTo: { channel: 'slack', accountId: 'default', peer: 'U1' } }, 'test')).rejects.toMatchObject({ code: 'unknown_target' });
    const view = await scheduler.add({ id: 'water', schedule: 'every 30m', prompt: 'drink water', deliverTo: target }, 'test');
    expect(view.nextRunAt).toBe(Math.ceil((BERLIN_8AM_DEC_2 + 1) / (30 * 60_000)) * 30 * 60_000);
    await expect(scheduler.remove('water')).resolves.toBe(true);
    scheduler.stop();
  });

  it("a job may not write where the account's policy does not: a group outside its allowlist, a peer outside allowFrom", async () => {
    const time = new TestTime(BERLIN_8AM_DEC_2);
    const config = testConfig(tmp.dir, { channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'allowlist', allowFrom: ['42'], groupPolicy: 'allowlist', groups: ['-1001'] } } });
    const scheduler = new Scheduler({ config, store: new MemoryJobStore(), clock: time, logger: silentLogger(), sink: () => recordingSink().sink, canDeliver: () => true, timers: time.timers });
    await scheduler.start();
    const add = (deliverTo: { peer?: string; group?: string }) => scheduler.add({ schedule: 'every 1h', prompt: 'x', deliverTo: { channel: 'telegram', accountId: 'default', ...deliverTo } }, 'test');
    await expect(add({ group: '-1002' })).rejects.toMatchObject({ code: 'target_not_allowed' });
    await expect(add({ peer: '7' })).rejects.toMatchObject({ code: 'target_not_allowed' });
    await expect(add({ group: '-1001' })).resolves.toMatchObject({ job: { deliverTo: { group: '-1001' } } });
    await expect(add({ peer: '42' })).resolves.toMatchObject({ job: { deliverTo: { peer: '42' } } });
    scheduler.stop();
  });

  it('a pass looks only at the jobs due by then (each job\'s state is read at its due time, not at every job\'s)', async () => {
    // 120 hourly jobs, two at each minute of the hour.
    const jobs = Array.from({ length: 120 }, (_, i) => ({ id: `j${i}`, schedule: `${i % 60} * * * *`, prompt: `job ${i}`, deliverTo: { channel: 'telegram', peer: '42' } }));
    const time = new TestTime(Date.UTC(2026, 11, 2, 7, 0, 30));
    const store = new MemoryJobStore();
    const looked: string[] = [];
    const stateOf = store.stateOf.bind(store);
    store.stateOf = (id, now) => { looked.push(id); return stateOf(id, now); };
    const { scheduler, messages } = make(jobs, time, store);
    await scheduler.start();
    expect(looked).toHaveLength(120); // at start, every job once
    looked.length = 0;
    await time.advanceTo(Date.UTC(2026, 11, 2, 7, 1, 30), scheduler);
    expect(looked.sort()).toEqual(['j1', 'j61']);
    expect(messages.map((m) => m.id).sort()).toEqual([`job:j1:${Date.UTC(2026, 11, 2, 7, 1)}`, `job:j61:${Date.UTC(2026, 11, 2, 7, 1)}`]);
    // An hour later every job fired once more, each looked at once.
    looked.length = 0;
    await time.advanceTo(Date.UTC(2026, 11, 2, 8, 1, 30), scheduler);
    expect(looked).toHaveLength(120);
    expect(messages).toHaveLength(122);
    scheduler.stop();
  });

  it('a job whose look failed at its due time is looked at again 10 s later and fires once', async () => {
    const time = new TestTime(BERLIN_8AM_DEC_2 - HOUR);
    const store = new MemoryJobStore();
    const stateOf = store.stateOf.bind(store);
    let failures = 0;
    store.stateOf = async (id, now) => {
      if (now >= BERLIN_8AM_DEC_2 && failures++ === 0) throw new Error('store unreachable');
      return stateOf(id, now);
    };
    const { scheduler, messages } = make([daily], time, store);
    await scheduler.start();
    await time.advanceTo(BERLIN_8AM_DEC_2 + 5_000, scheduler);
    expect(messages).toHaveLength(0);
    await time.advanceTo(BERLIN_8AM_DEC_2 + 11_000, scheduler);
    expect(messages.map((m) => m.id)).toEqual([`job:digest:${BERLIN_8AM_DEC_2}`]);
    scheduler.stop();
  });
});
