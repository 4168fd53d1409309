import { afterEach, expect, it } from 'vitest';
import { ClusterListener } from '../../src/cluster/cluster-listener.ts';
import { PgWorkQueue } from '../../src/cluster/pg-work-queue.ts';
import { SessionLocks } from '../../src/cluster/session-locks.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { InboundMessage } from '../../src/core/message.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();

/** A platform update nested deeper than JSON.stringify can go. */
function deeplyNested(depth: number): unknown {
  let node: unknown = { leaf: true };
  for (let i = 0; i < depth; i++) node = { a: node };
  return node;
}

describePg('the shared work queue and platform raw updates', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => { for (const close of closers.splice(0).reverse()) await close(); });

  it('accepts a message whose raw update is too deep to serialize, and stores it without the raw update', async () => {
    const logger = silentLogger();
    const locks = new SessionLocks({ uri: db.uri, logger, leaseMs: 30_000, maxConnections: 4 });
    const listener = new ClusterListener({ uri: db.uri, logger });
    await listener.start();
    const queue = new PgWorkQueue({ pool: db.pool, locks, listener, replicaId: 'r1', logger, maxClaims: 2, pollMs: 5000 });
    closers.push(async () => { queue.close(); await listener.close(); await locks.close(); });
    const raw = deeplyNested(200_000);
    expect(() => JSON.stringify(raw)).toThrow(RangeError);
    const message: InboundMessage = {
      id: 'deep-1', channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: '42', peerId: '42',
      sender: { id: '42', name: 'x' }, text: 'hello', attachments: [], mentionsBot: false, receivedAt: 1, raw,
    };
    const accepted = await queue.accept(message, 'agent:main:telegram:direct:42', 'c-deep');
    expect(accepted.accepted).toBe(true);
    const { rows } = await db.pool.query<{ message: Record<string, unknown> }>('SELECT message FROM sb_inbox WHERE correlation_id = $1', ['c-deep']);
    expect(rows[0]?.message.text).toBe('hello');
    expect(rows[0]?.message).not.toHaveProperty('raw');
  });
});
