import { createServer } from 'node:net';
import { expect, it } from 'vitest';
import { probeClusterDatabase } from '../../src/cluster/cluster-probe.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();

describePg('switchboard doctor: the cluster database', () => {
  it('names the server version, the schema state and the live replicas of a migrated database', async () => {
    await db.pool.query(`INSERT INTO sb_replica (replica_id, host, pid, version, started_at, seen_at) VALUES ('a', 'h', 1, '0.1.0', now(), now()), ('b', 'h', 2, '0.1.0', now(), now() - interval '1 hour')`);
    const probe = await probeClusterDatabase(db.uri);
    expect(probe.ok).toBe(true);
    expect(probe.detail).toMatch(/^PostgreSQL 1\d[.\d]* at postgres:\/\/.*; schema up to date; 1 live replica$/);
  });

  it('fails with the redacted URI when nothing answers there', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const probe = await probeClusterDatabase(`postgres://user:s3cret-pass@127.0.0.1:${port}/x`, 2000);
    expect(probe.ok).toBe(false);
    expect(probe.detail).toContain(`postgres://user:***@127.0.0.1:${port}/x`);
    expect(probe.detail).not.toContain('s3cret-pass');
  });
});
