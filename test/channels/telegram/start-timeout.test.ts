import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createTelegramChannel } from '../../../channels/telegram/index.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { silentLogger } from '../../../src/core/logger.ts';
import { tempDir, testConfig } from '../../helpers/gateway.ts';

describe('Telegram start-up timeout', () => {
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server?.close(resolve));
  });

  it('says "timed out", not "aborted", when the Bot API never answers', async () => {
    server = createServer((socket) => { sockets.add(socket); }); // accepts, never answers
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const tmp = tempDir();
    const config = testConfig(tmp.dir, {}, { TELEGRAM_BOT_TOKEN: '123:abc-token', TELEGRAM_API_ROOT: root });
    const adapter = createTelegramChannel({ account: config.channels.telegram[0]!, clock: systemClock, logger: silentLogger(), stateDir: config.stateDir, startTimeoutMs: 200 });
    const error = await adapter.start(async () => { throw new Error('unused'); }).catch((e: unknown) => e);
    tmp.remove();
    expect((error as Error).message).toBe(`The Telegram Bot API at ${root} timed out after 200 ms: check the network, or TELEGRAM_API_ROOT if you set it.`);
    expect(adapter.statusDetail).not.toMatch(/abort/i);
  });
});
