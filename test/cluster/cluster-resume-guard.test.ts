import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { ClusterResumes, resumeIdOf } from '../../src/cluster/cluster-resume.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import type { QueuedJob } from '../../src/gateway/shared-queue.ts';
import type { SessionEntry } from '../../src/sessions/entry.ts';
import type { SessionStore } from '../../src/sessions/store.ts';
import { silentLogger } from '../../src/core/logger.ts';

const KEY = 'agent:main:direct:5';
const entry = (over: Partial<SessionEntry> = {}): SessionEntry => ({
  key: KEY, sessionId: 's1', runState: 'continuing', goal: 'finish', updatedAt: 1000,
  checkpoint: { goal: 'finish', batch: 1, iteration: 2, correlationId: 'c1', lastEntryId: 'e4' }, ...over,
} as SessionEntry);

function harness(stored: SessionEntry | undefined) {
  const done: QueuedJob[] = [];
  const ran: QueuedJob[] = [];
  const store = { get: async () => stored } as unknown as SessionStore;
  const resumes = new ClusterResumes({
    pool: {} as pg.Pool, store, queue: { done: async (job) => { done.push(job); } }, gateway: { submitInternal: async () => undefined },
    logger: silentLogger(), resume: true, settle: async () => undefined, watchMs: 1000,
  });
  const run = resumes.guard(async (job) => { ran.push(job); return undefined; });
  const job = (id: string, kind: 'background_auto_resume' | 'background_auto_continue' = 'background_auto_resume'): QueuedJob => ({
    key: KEY, seq: 3, correlationId: 'x', replayed: false, sent: 0,
    message: { id, channel: 'internal', internal: { kind, sessionKey: KEY } } as InboundMessage,
  });
  return { done, ran, run, job };
}

describe('cluster resumes: a resume runs only for the run state it was queued for', () => {
  it('the same state: the resume runs', async () => {
    const h = harness(entry());
    await h.run(h.job(resumeIdOf(entry())));
    expect(h.ran).toHaveLength(1);
    expect(h.done).toHaveLength(0);
  });

  it('a batch ran since (the checkpoint moved on): the resume is marked done without a turn', async () => {
    const h = harness(entry({ checkpoint: { goal: 'finish', batch: 2, iteration: 1, correlationId: 'c2', lastEntryId: 'e6' }, updatedAt: 2000 }));
    await h.run(h.job(resumeIdOf(entry())));
    expect(h.ran).toHaveLength(0);
    expect(h.done).toHaveLength(1);
  });

  it('the run ended or was paused meanwhile: skipped', async () => {
    for (const runState of ['completed', 'paused', 'idle'] as const) {
      const h = harness(entry({ runState }));
      await h.run(h.job(resumeIdOf(entry())));
      expect(h.ran).toHaveLength(0);
    }
  });

  it('other messages, and start-up resumes of one machine, pass through untouched', async () => {
    const h = harness(undefined);
    await h.run(h.job('msg-1', 'background_auto_continue'));
    await h.run(h.job('7f6e-uuid'));
    expect(h.ran).toHaveLength(2);
    expect(h.done).toHaveLength(0);
  });

  it('the id names the state: another session id, run state, checkpoint or last activity gives another id', () => {
    const base = resumeIdOf(entry());
    expect(resumeIdOf(entry())).toBe(base);
    expect(base).toMatch(/^resume:/);
    for (const over of [{ sessionId: 's2' }, { runState: 'running' as const }, { updatedAt: 1001 }, { checkpoint: { goal: 'finish', batch: 1, iteration: 2, correlationId: 'c1', lastEntryId: 'e5' } }]) {
      expect(resumeIdOf(entry(over))).not.toBe(base);
    }
  });
});
