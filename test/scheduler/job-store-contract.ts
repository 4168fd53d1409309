import { afterEach, beforeEach, expect, it } from 'vitest';
import type { Job, JobStore } from '../../src/scheduler/jobs.ts';

/** A fixed instant the tests count from (epoch ms). */
export const T0 = Date.parse('2026-12-01T08:00:00Z');
const MINUTE = 60_000;

/** A runtime job as the tool would make it. */
export function job(id: string, overrides: Partial<Job> = {}): Job {
  return {
    id,
    schedule: '0 8 * * *',
    timezone: 'Europe/Berlin',
    prompt: `Summarize the news for ${id}.`,
    deliverTo: { channel: 'telegram', accountId: 'default', peer: '42' },
    session: 'isolated',
    tokenBudget: 50_000,
    enabled: true,
    source: 'runtime',
    createdAt: T0,
    createdBy: 'tool:agent:main:telegram:dm:42',
    ...overrides,
  };
}

/**
 * The behaviour every {@link JobStore} owes its port (SPEC §17), registered as tests of the calling `describe`.
 * `open` gives an empty store for each test (closed after it).
 */
export function jobStoreContract(open: () => Promise<JobStore>): void {
  let store: JobStore;
  beforeEach(async () => {
    store = await open();
  });
  afterEach(async () => {
    await store.close?.();
  });

  it('stores runtime jobs whole, lists them in creation order, replaces one by id and removes it', async () => {
    const morning = job('morning', { agentId: 'ops', deliverTo: { channel: 'slack', accountId: 'work', group: 'C123', threadId: '1700.1' } });
    const later = job('later', { createdAt: T0 + MINUTE, schedule: 'every 30m', prompt: 'Größe 🚀\n"quoted" \\ line', createdBy: undefined });
    await store.putJob(later);
    await store.putJob(morning);
    expect(await store.listJobs()).toEqual([morning, later]);

    const replaced = { ...later, prompt: 'Something else.', enabled: false };
    await store.putJob(replaced);
    expect(await store.listJobs()).toEqual([morning, replaced]);

    expect(await store.removeJob('morning')).toBe(true);
    expect(await store.listJobs()).toEqual([replaced]);
    expect(await store.removeJob('morning')).toBe(false);
    expect(await store.removeJob('never-there')).toBe(false);
  });

  it('removing a job deletes its state too (a job made again with that id starts afresh)', async () => {
    await store.putJob(job('daily'));
    await store.stateOf('daily', T0);
    expect(await store.claim('daily', T0 + MINUTE)).toBe(true);
    await store.stateOf('other', T0);
    expect(await store.removeJob('daily')).toBe(true);
    expect((await store.listStates()).map((s) => s.jobId)).toEqual(['other']);
    expect(await store.stateOf('daily', T0 + 2 * MINUTE)).toEqual({ jobId: 'daily', since: T0 + 2 * MINUTE, runs: 0 });
    expect(await store.claim('daily', T0 + MINUTE)).toBe(true);
  });

  it('makes a state with since = now the first time it is asked for, and keeps it', async () => {
    expect(await store.stateOf('a', T0)).toEqual({ jobId: 'a', since: T0, runs: 0 });
    expect(await store.stateOf('a', T0 + 5 * MINUTE)).toEqual({ jobId: 'a', since: T0, runs: 0 });
    await store.stateOf('b', T0 + MINUTE);
    expect(await store.listStates()).toEqual([{ jobId: 'a', since: T0, runs: 0 }, { jobId: 'b', since: T0 + MINUTE, runs: 0 }]);
  });

  it('claims a due time once: true the first time, false for the same or an earlier one, true for a later one', async () => {
    await store.stateOf('j', T0);
    const due = T0 + 10 * MINUTE;
    expect(await store.claim('j', due)).toBe(true);
    expect((await store.stateOf('j', T0)).lastDueAt).toBe(due);
    expect(await store.claim('j', due)).toBe(false);
    expect(await store.claim('j', due - 1)).toBe(false);
    expect(await store.claim('j', T0)).toBe(false);
    expect((await store.stateOf('j', T0)).lastDueAt).toBe(due);
    expect(await store.claim('j', due + 1)).toBe(true);
    expect(await store.stateOf('j', T0)).toEqual({ jobId: 'j', since: T0, runs: 0, lastDueAt: due + 1 });
    // Another job's due times are its own.
    expect(await store.claim('k', due)).toBe(true);
  });

  it('claims for a job without a state: makes the state, and a second claim of that due time is refused', async () => {
    expect(await store.claim('fresh', T0)).toBe(true);
    expect(await store.claim('fresh', T0)).toBe(false);
    expect(await store.stateOf('fresh', T0 + 99 * MINUTE)).toEqual({ jobId: 'fresh', since: T0, lastDueAt: T0, runs: 0 });
  });

  it('claims at the millisecond: a due time 1 ms after the last one is new', async () => {
    const due = T0 + 0.5 * MINUTE + 7;
    expect(await store.claim('ms', due)).toBe(true);
    expect(await store.claim('ms', due)).toBe(false);
    expect(await store.claim('ms', due + 1)).toBe(true);
    expect((await store.stateOf('ms', T0)).lastDueAt).toBe(due + 1);
  });

  it('refuses a due time that is not a finite number', async () => {
    await expect(store.claim('nan', Number.NaN)).rejects.toThrow(RangeError);
    await expect(store.claim('nan', Number.POSITIVE_INFINITY)).rejects.toThrow(RangeError);
    expect(await store.claim('nan', T0)).toBe(true);
  });

  it('records runs: runs + 1 each time, the last outcome, time and error (cleared by a run without one)', async () => {
    await store.stateOf('r', T0);
    await store.recordRun('r', { outcome: 'failed', at: T0 + MINUTE, error: 'provider timeout after 60 s' });
    expect(await store.stateOf('r', T0)).toEqual({
      jobId: 'r', since: T0, runs: 1, lastRunAt: T0 + MINUTE, lastOutcome: 'failed', lastError: 'provider timeout after 60 s',
    });
    await store.recordRun('r', { outcome: 'delivered', at: T0 + 2 * MINUTE });
    expect(await store.stateOf('r', T0)).toEqual({ jobId: 'r', since: T0, runs: 2, lastRunAt: T0 + 2 * MINUTE, lastOutcome: 'delivered' });
    await store.recordRun('r', { outcome: 'silent', at: T0 + 3 * MINUTE });
    expect(await store.stateOf('r', T0)).toMatchObject({ runs: 3, lastOutcome: 'silent', lastRunAt: T0 + 3 * MINUTE });
    // A run of a job whose state was not made yet counts too.
    await store.recordRun('unseen', { outcome: 'undeliverable', at: T0 });
    expect(await store.stateOf('unseen', T0 + MINUTE)).toEqual({ jobId: 'unseen', since: T0, runs: 1, lastOutcome: 'undeliverable', lastRunAt: T0 });
  });

  it('pauses and resumes a job, keeping the rest of its state', async () => {
    await store.stateOf('p', T0);
    await store.claim('p', T0 + MINUTE);
    await store.recordRun('p', { outcome: 'budget', at: T0 + 2 * MINUTE, error: 'over 50000 tokens' });
    await store.setPaused('p', true);
    const paused = { jobId: 'p', since: T0, runs: 1, lastDueAt: T0 + MINUTE, lastRunAt: T0 + 2 * MINUTE, lastOutcome: 'budget', lastError: 'over 50000 tokens', paused: true };
    expect(await store.stateOf('p', T0)).toEqual(paused);
    expect(await store.listStates()).toEqual([paused]);
    await store.setPaused('p', false);
    expect((await store.stateOf('p', T0)).paused).toBeFalsy();
    // Pausing a job the scheduler has not seen yet keeps it paused.
    await store.setPaused('new', true);
    expect(await store.stateOf('new', T0)).toMatchObject({ jobId: 'new', runs: 0, paused: true });
  });
}
