import { expect, it } from 'vitest';
import { runFenced } from '../../src/cluster/fence.ts';
import { LeaseLostError } from '../../src/core/errors.ts';
import { PgGroupContext } from '../../src/cluster/pg-group-context.ts';
import { SessionLocks } from '../../src/cluster/session-locks.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { GroupContextBuffer } from '../../src/gateway/group-context.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0, 123);

describePg('group context on PostgreSQL', () => {
  it('keeps the newest items up to the limit, in order, like the in-memory buffer; take empties the key', async () => {
    const shared = new PgGroupContext({ pool: db.pool, limit: 3 });
    const other = new PgGroupContext({ pool: db.pool, limit: 3 });
    const local = new GroupContextBuffer({ limit: 3 });
    const key = 'agent:main:telegram:group:-100';
    for (let i = 0; i < 5; i++) {
      const item = { name: `u${i}`, text: `text ${i}`, at: T0 + i };
      await (i % 2 ? shared : other).add(key, item);
      local.add(key, item);
    }
    await shared.add('agent:main:telegram:group:-200', { name: 'x', text: 'elsewhere', at: T0 });
    expect(await shared.size(key)).toBe(3);
    const taken = await other.take(key);
    expect(taken).toEqual(local.take(key));
    expect(taken?.map((i) => i.name)).toEqual(['u2', 'u3', 'u4']);
    expect(await shared.take(key)).toBeUndefined();
    expect(await shared.take('agent:main:telegram:group:-200')).toEqual([{ name: 'x', text: 'elsewhere', at: T0 }]);
  });

  it('stays within the limit when replicas add at once; limit 0 keeps nothing; NUL characters are stored as U+FFFD', async () => {
    const key = 'agent:main:slack:channel:c';
    const stores = [new PgGroupContext({ pool: db.pool, limit: 5 }), new PgGroupContext({ pool: db.pool, limit: 5 })];
    await Promise.all(Array.from({ length: 30 }, (_, i) => stores[i % 2]!.add(key, { name: 'n', text: `t${i}`, at: T0 })));
    expect(await stores[0]!.size(key)).toBe(5);
    await new PgGroupContext({ pool: db.pool, limit: 0 }).add('agent:main:slack:channel:none', { name: 'n', text: 't', at: T0 });
    expect(await stores[0]!.size('agent:main:slack:channel:none')).toBe(0);
    await stores[0]!.take(key);
    await stores[0]!.add(key, { name: 'a\u0000', text: 'b\u0000c', at: T0 });
    expect(await stores[1]!.take(key)).toEqual([{ name: 'a\ufffd', text: 'b\ufffdc', at: T0 }]);
  });

  it('take runs on the lane connection of a held session: a rolled-back turn gives the items back; a lost lock fails', async () => {
    const key = 'agent:main:telegram:group:-300';
    const context = new PgGroupContext({ pool: db.pool, limit: 50 });
    await context.add(key, { name: 'u', text: 'kept for the rerun', at: T0 });
    const locks = new SessionLocks({ uri: db.uri, logger: silentLogger(), leaseMs: 30_000, maxConnections: 1 });
    try {
      const held = (await locks.tryAcquire(key))!;
      await runFenced(held.fence, async () => {
        await held.fence.client.query('BEGIN');
        expect(await context.take(key)).toHaveLength(1);
        await held.fence.client.query('ROLLBACK');
      });
      const pid = (await held.fence.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      await expect(runFenced(held.fence, () => context.take(key))).rejects.toBeInstanceOf(LeaseLostError);
      await held.release();
    } finally {
      await locks.close();
    }
    expect(await context.take(key)).toEqual([{ name: 'u', text: 'kept for the rerun', at: T0 }]);
  });
});
