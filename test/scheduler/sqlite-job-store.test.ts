import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteJobStore } from '../../src/scheduler/sqlite-job-store.ts';
import { T0, job, jobStoreContract } from './job-store-contract.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'sb-jobs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshFile = () => path.join(dir, `state-${++files}`, 'jobs.sqlite');

describe('SqliteJobStore', () => {
  jobStoreContract(async () => SqliteJobStore.open(freshFile()));

  it('finds its jobs and states after a restart (reopened file), and a claimed due time stays claimed', async () => {
    const file = freshFile();
    const first = SqliteJobStore.open(file);
    const daily = job('daily');
    await first.putJob(daily);
    await first.stateOf('daily', T0);
    expect(await first.claim('daily', T0 + 60_000)).toBe(true);
    await first.recordRun('daily', { outcome: 'failed', at: T0 + 61_000, error: 'boom' });
    await first.setPaused('config-job', true);
    await first.close();

    const second = SqliteJobStore.open(file);
    try {
      expect(await second.listJobs()).toEqual([daily]);
      expect(await second.listStates()).toEqual([
        { jobId: 'config-job', since: expect.any(Number), runs: 0, paused: true },
        { jobId: 'daily', since: T0, runs: 1, lastDueAt: T0 + 60_000, lastRunAt: T0 + 61_000, lastOutcome: 'failed', lastError: 'boom' },
      ]);
      expect(await second.claim('daily', T0 + 60_000)).toBe(false);
      expect(await second.claim('daily', T0 + 120_000)).toBe(true);
    } finally {
      await second.close();
    }
  });

  it('claims once per due time among many claims of one process interleaved', async () => {
    const store = SqliteJobStore.open(freshFile());
    try {
      const wins = await Promise.all(Array.from({ length: 50 }, () => store.claim('j', T0)));
      expect(wins.filter(Boolean)).toHaveLength(1);
    } finally {
      await store.close();
    }
  });

  it('refuses calls after close', async () => {
    const store = SqliteJobStore.open(freshFile());
    await store.close();
    await store.close();
    await expect(store.listJobs()).rejects.toThrow();
  });
});
