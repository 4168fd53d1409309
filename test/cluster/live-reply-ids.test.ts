// SPEC §16 in cluster mode: a turn cut short is finished by editing the messages its live reply posted, never by a
// second copy. The posted ids are journaled with the queued message, through the claim's lock, so the replica that
// runs the message again (after the first one's lock went) knows them.
import { afterEach, expect, it } from 'vitest';
import { ClusterListener } from '../../src/cluster/cluster-listener.ts';
import { currentFence } from '../../src/cluster/fence.ts';
import { PgWorkQueue } from '../../src/cluster/pg-work-queue.ts';
import { SessionLocks } from '../../src/cluster/session-locks.ts';
import { LeaseLostError } from '../../src/core/errors.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import type { QueuedJob } from '../../src/gateway/shared-queue.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();

const message = (id: string): InboundMessage => ({
  id, channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: '42', peerId: '42',
  sender: { id: '42', name: 'p' }, text: `hello ${id}`, attachments: [], mentionsBot: false, receivedAt: Date.now(),
});

describePg('live reply ids in the shared queue (cluster mode)', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => { for (const close of closers.splice(0).reverse()) await close(); });

  async function queue(replicaId: string): Promise<PgWorkQueue> {
    const logger = silentLogger();
    const locks = new SessionLocks({ uri: db.uri, logger, leaseMs: 30_000, maxConnections: 4 });
    const listener = new ClusterListener({ uri: db.uri, logger });
    await listener.start();
    const q = new PgWorkQueue({ pool: db.pool, locks, listener, replicaId, logger, maxClaims: 2, pollMs: 100 });
    closers.push(async () => { q.close(); await listener.close(); await locks.close(); });
    return q;
  }

  it('a replica that runs a message again gets the ids the first attempt posted; the first cannot write them once its lock is gone', async () => {
    const first = await queue('first');
    const cut = new Promise<unknown>((resolve) => {
      first.start(async (job) => {
        await first.live(job, ['5000']);
        await first.live(job, ['5000', '5001']);
        const fence = currentFence()!;
        await db.pool.query('SELECT pg_terminate_backend($1)', [(fence.client as unknown as { processID: number }).processID]);
        for (let i = 0; i < 400 && fence.alive; i++) await new Promise((r) => setTimeout(r, 5));
        resolve(await first.live(job, ['5000', '5001', '5002']).then(() => 'written', (error: unknown) => error));
        return undefined;
      });
    });
    const accepted = await first.accept(message('m1'), 'agent:main:telegram:direct:42', 'c1');
    expect(accepted.accepted).toBe(true);
    expect(await cut).toBeInstanceOf(LeaseLostError);
    first.close();

    const second = await queue('second');
    const rerun = await new Promise<QueuedJob>((resolve) => {
      second.start(async (job) => {
        resolve(job);
        await second.done(job, undefined);
        return undefined;
      });
    });
    expect(rerun).toMatchObject({ seq: 1, replayed: true, live: ['5000', '5001'] });
  });

  it('a message whose first attempt posted nothing runs again with no ids', async () => {
    const q = await queue('only');
    const job = await new Promise<QueuedJob>((resolve) => {
      q.start(async (j) => { resolve(j); await q.done(j, undefined); return undefined; });
      void q.accept(message('m2'), 'agent:main:telegram:direct:43', 'c2');
    });
    expect(job.replayed).toBe(false);
    expect(job.live).toBeUndefined();
  });
});
