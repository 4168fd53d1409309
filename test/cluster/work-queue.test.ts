import { afterEach, expect, it } from 'vitest';
import { ClusterListener } from '../../src/cluster/cluster-listener.ts';
import { currentFence } from '../../src/cluster/fence.ts';
import { PgWorkQueue } from '../../src/cluster/pg-work-queue.ts';
import { LeaseLostError } from '../../src/core/errors.ts';
import { SessionLocks } from '../../src/cluster/session-locks.ts';
import type { TurnResult } from '../../src/core/channel-adapter.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();

const message = (id: string): InboundMessage => ({
  id, channel: 'internal', accountId: 'default', chatType: 'direct', chatId: 'x', peerId: 'x',
  sender: { id: 'x', name: 'x' }, text: `work ${id}`, attachments: [], mentionsBot: false, receivedAt: Date.now(),
});

describePg('the shared work queue', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => { for (const close of closers.splice(0).reverse()) await close(); });

  async function queue(replicaId: string, pollMs = 5000): Promise<PgWorkQueue> {
    const logger = silentLogger();
    const locks = new SessionLocks({ uri: db.uri, logger, leaseMs: 30_000, maxConnections: 4 });
    const listener = new ClusterListener({ uri: db.uri, logger });
    await listener.start();
    const q = new PgWorkQueue({ pool: db.pool, locks, listener, replicaId, logger, maxClaims: 2, pollMs });
    closers.push(async () => { q.close(); await listener.close(); await locks.close(); });
    return q;
  }

  it('a replica waiting on a message another replica runs gets its result (sessions_yield across replicas), in order per session', async () => {
    const asker = await queue('asker');
    const worker = await queue('worker');
    const ran: string[] = [];
    worker.start(async (job) => {
      ran.push(`${job.key}#${job.seq}:${job.message.id}`);
      const result = { sessionKey: job.key, sessionId: 's', correlationId: job.correlationId, replies: [{ text: `answer to ${job.message.id}` }], outcome: 'replied' } as unknown as TurnResult;
      await worker.done(job, result);
      return result;
    });
    const key = 'agent:main:subagent:t1';
    const first = await asker.accept(message('q1'), key, 'c1');
    const second = await asker.accept(message('q2'), key, 'c2');
    if (!first.accepted || !second.accepted) throw new Error('not accepted');
    expect([first.seq, second.seq]).toEqual([1, 2]);
    const [r1, r2] = await Promise.all([asker.whenDone(key, first.seq), asker.whenDone(key, second.seq)]);
    expect(r1?.replies[0]?.text).toBe('answer to q1');
    expect(r2?.replies[0]?.text).toBe('answer to q2');
    expect(ran).toEqual([`${key}#1:q1`, `${key}#2:q2`]);
  });

  it('a replica at maxClaims runs a session it turned away as soon as a slot frees, not at the next poll', async () => {
    const q = await queue('solo', 600_000);
    const ran: string[] = [];
    const gates = new Map<string, () => void>();
    q.start(async (job) => {
      ran.push(job.key);
      if (job.key !== 'k3') await new Promise<void>((resolve) => gates.set(job.key, resolve));
      const result = { sessionKey: job.key, sessionId: 's', correlationId: job.correlationId, replies: [], outcome: 'replied' } as unknown as TurnResult;
      await q.done(job, result);
      return result;
    });
    for (const key of ['k1', 'k2']) await q.accept(message(key), key, key);
    await expect.poll(() => [...gates.keys()].sort()).toEqual(['k1', 'k2']);
    const third = await q.accept(message('k3'), 'k3', 'k3');
    if (!third.accepted) throw new Error('not accepted');
    expect([...ran].sort()).toEqual(['k1', 'k2']);
    gates.get('k1')?.();
    await expect(q.whenDone('k3', third.seq)).resolves.toMatchObject({ sessionKey: 'k3' });
    expect(ran.slice(2)).toEqual(['k3']);
    gates.get('k2')?.();
  });

  it('a claimed message whose claim lost its lock is never run under a lock taken afresh (another replica runs it)', async () => {
    const q = await queue('claimer');
    const outcome = new Promise<{ jobRun: unknown; freshRun: unknown }>((resolve) => {
      q.start(async (job) => {
        // The claim's lane connection dies (a freeze past the lease, a cut) before the job's lane task runs.
        const fence = currentFence()!;
        const pid = (fence.client as unknown as { processID: number }).processID;
        await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        for (let i = 0; i < 400 && fence.alive; i++) await new Promise((r) => setTimeout(r, 5));
        let ran = false;
        const jobRun = await q.runExclusive(job.key, async () => { ran = true; }, job).then(() => ran, (error: unknown) => error);
        // Work that is not a claimed job (an HTTP turn) takes the lock afresh.
        const freshRun = await q.runExclusive(job.key, async () => 'fresh');
        resolve({ jobRun, freshRun });
        return undefined;
      });
    });
    await q.accept(message('m1'), 'agent:main:direct:lost', 'c1');
    const { jobRun, freshRun } = await outcome;
    expect(jobRun).toBeInstanceOf(LeaseLostError);
    expect(freshRun).toBe('fresh');
  });
});
