// Scheduled jobs (issue 32): what a due time costs the scheduler with 10,000 jobs in the SQLite job store. The
// clock and the timer are the bench's own; the gateway's intake accepts each run at once (no turn runs).
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../src/config/load.ts';
import type { InboundSink } from '../src/core/channel-adapter.ts';
import { silentLogger } from '../src/core/logger.ts';
import { Scheduler } from '../src/scheduler/scheduler.ts';
import { SqliteJobStore } from '../src/scheduler/sqlite-job-store.ts';
import { nowMs, percentile, round } from './stats.ts';

/** One timer, fired by the bench. */
class BenchTimer {
  fire: (() => void) | undefined;
  setTimeout = (fn: () => void) => { this.fire = fn; return 1; };
  clearTimeout = () => { this.fire = undefined; };
}

/**
 * `count` hourly jobs, spread over the minutes of the hour; the scheduler starts (every job looked at once), then
 * `minutes` due times pass: each fires the jobs due at that minute. Reports the start's pass and the due times'
 * (wall time, CPU), the runs each fired, and the worst stretch the event loop was held.
 */
export async function runJobsBench(options: { dir: string; count: number; minutes: number }) {
  const dir = path.join(options.dir, 'jobs');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const jobs = Array.from({ length: options.count }, (_, i) => ({
    id: `j${i}`, schedule: `${i % 60} * * * *`, prompt: `job ${i}`, deliverTo: { channel: 'webchat', peer: `p${i}` },
  }));
  const config = loadConfig({ cwd: dir, env: {}, dotenv: false, overrides: { stateDir: dir, logLevel: 'silent', jobs } });
  const store = SqliteJobStore.open(path.join(dir, 'jobs.sqlite'));
  let runs = 0;
  const sink: InboundSink = async () => { runs++; return { status: 'accepted', correlationId: 'c', done: Promise.resolve(undefined) }; };
  let now = Date.UTC(2026, 11, 2, 7, 0, 30);
  const timer = new BenchTimer();
  const scheduler = new Scheduler({ config, store, clock: { now: () => now }, logger: silentLogger(), sink: () => sink, canDeliver: () => true, timers: timer });
  const measure = async (work: () => Promise<void>) => {
    const cpu = process.cpuUsage();
    const t0 = nowMs();
    await work();
    const used = process.cpuUsage(cpu);
    return { ms: nowMs() - t0, cpuMs: (used.user + used.system) / 1000 };
  };
  const start = await measure(() => scheduler.start());
  const passes: { ms: number; cpuMs: number; runs: number }[] = [];
  for (let m = 1; m <= options.minutes; m++) {
    now = Date.UTC(2026, 11, 2, 7, m, 0);
    const before = runs;
    const fire = timer.fire;
    const pass = await measure(async () => {
      fire?.();
      await scheduler.idle();
    });
    passes.push({ ...pass, runs: runs - before });
  }
  scheduler.stop();
  await store.close?.();
  await rm(dir, { recursive: true, force: true });
  return {
    jobs: options.count, startMs: round(start.ms, 0), startCpuMs: round(start.cpuMs, 0),
    dueTimes: passes.length, runsPerDueTime: round(percentile(passes.map((p) => p.runs), 50), 0),
    dueTimeMs: round(percentile(passes.map((p) => p.ms), 50), 1), dueTimeCpuMs: round(percentile(passes.map((p) => p.cpuMs), 50), 1),
    perRunUs: round((percentile(passes.map((p) => p.ms), 50) * 1000) / Math.max(1, percentile(passes.map((p) => p.runs), 50)), 0),
  };
}
