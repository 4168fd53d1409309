import { createServer, type Server } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { startGateway } from '../../src/main.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { ConfigError } from '../../src/core/errors.ts';
import { tempDir, testConfig } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';

const db = useTestDatabase();

async function connections(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
  return rows[0]!.n;
}

describePg('start-up that fails half-way in cluster mode', () => {
  let blocker: Server | undefined;
  const dirs: (() => void)[] = [];
  afterEach(async () => {
    await new Promise((r) => (blocker ? blocker.close(r) : r(undefined)));
    for (const remove of dirs.splice(0)) remove();
  });

  it('a port in use: start refuses, and every database connection it had opened is closed again', async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker!.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    const tmp = tempDir();
    dirs.push(tmp.remove);
    const before = await connections();
    const config = testConfig(tmp.dir, { store: db.uri, gateway: { port }, cluster: { replicaId: 'fails' }, channels: { telegram: { dmPolicy: 'open', mode: 'polling' } } }, {});
    await expect(startGateway({ config, logger: silentLogger() })).rejects.toBeInstanceOf(ConfigError);
    for (let i = 0; i < 100 && (await connections()) > before; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await connections()).toBe(before);
    // The state folder is free again: a start on another port comes up.
    const again = await startGateway({ config: testConfig(tmp.dir, { store: db.uri, cluster: { replicaId: 'works' } }, {}), logger: silentLogger() });
    await again.stop();
  }, 30_000);
});
