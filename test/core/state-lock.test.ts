import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { StateLockedError } from '../../src/core/errors.ts';
import { readStateOwner, StateLock, stateLockPaths } from '../../src/core/state-lock.ts';
import { startGateway } from '../../src/main.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { startTestGateway, testConfig } from '../helpers/gateway.ts';
import { useTempDir } from '../helpers/fixtures.ts';

describe('one owner per state folder', () => {
  const tmp = useTempDir();

  it('refuses a second lock, names the owner, and frees the folder on release', async () => {
    const dir = path.join(tmp.dir, 'data');
    const first = await StateLock.acquire(dir, { role: 'gateway', command: 'switchboard start' });
    first.update({ url: 'http://127.0.0.1:4321', port: 4321 });
    expect(readStateOwner(dir)).toMatchObject({ pid: process.pid, role: 'gateway', port: 4321, url: 'http://127.0.0.1:4321' });
    expect(await StateLock.isHeld(dir)).toBe(true);
    const refused = await StateLock.acquire(dir, { role: 'gateway', command: 'switchboard start' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StateLockedError);
    expect((refused as Error).message).toContain(`pid ${process.pid}, port 4321 (http://127.0.0.1:4321)`);
    expect((refused as Error).message).toContain('SWITCHBOARD_STATE_DIR');
    await first.release();
    expect(existsSync(stateLockPaths(dir).owner)).toBe(false);
    expect(await StateLock.isHeld(dir)).toBe(false);
    const again = await StateLock.acquire(dir, { role: 'cli', command: 'switchboard chat' });
    await again.release();
  });

  it('waits for a short hold when asked to', async () => {
    const dir = path.join(tmp.dir, 'data');
    const cli = await StateLock.acquire(dir, { role: 'cli', command: 'switchboard pairing approve' });
    const waiting = StateLock.acquire(dir, { role: 'gateway', command: 'switchboard start' }, { waitMs: 5000, pollMs: 10 });
    await cli.release();
    const gateway = await waiting;
    expect(gateway.info.role).toBe('gateway');
    await gateway.release();
  });

  it('a second gateway on the same state folder does not start; it does once the first stopped', async () => {
    const first = await startTestGateway({ dir: tmp.dir });
    const second = await startGateway({ config: testConfig(tmp.dir), logger: silentLogger(), lockWaitMs: 0 }).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(StateLockedError);
    expect((second as Error).message).toMatch(new RegExp(`A Switchboard gateway already runs on the state folder .*: pid ${process.pid}, port ${first.port} `));
    // The first one still works.
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
    await first.stop();
    const third = await startTestGateway({ dir: tmp.dir });
    await third.stop();
  });
});
