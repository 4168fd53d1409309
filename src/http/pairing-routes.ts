import type { Logger } from '../core/logger.ts';
import { BadRequestError } from '../core/errors.ts';
import type { PairingAdmin } from '../routing/pairing-admin.ts';
import type { HttpApp } from './app.ts';
import { readJson } from './http-error.ts';

function field(body: unknown, name: string): string {
  const value = (body as Record<string, unknown> | null)?.[name];
  if (typeof value !== 'string' || !value.trim()) throw new BadRequestError(`Field "${name}" must be a non-empty string.`, 'invalid_value');
  return value.trim();
}

/**
 * `/admin/pairing` for `switchboard pairing` while a gateway runs: `GET` lists pending codes and paired
 * peers; `POST /admin/pairing/approve` `{ channel, code }`; `POST /admin/pairing/revoke` `{ channel, peerId }`.
 */
export function mountPairingRoutes(admin: PairingAdmin, logger: Logger): (app: HttpApp) => void {
  return (app) => {
    app.get('/admin/pairing', async (c) => c.json(await admin.list()));
    app.post('/admin/pairing/approve', async (c) => {
      const body = await readJson(c);
      const result = await admin.approve(field(body, 'channel'), field(body, 'code'));
      logger.info({ channel: result.peer.channel, peerId: result.peer.peerId, correlationId: c.get('correlationId') }, 'pairing approved');
      if (result.warning) logger.warn(result.warning);
      return c.json(result);
    });
    app.post('/admin/pairing/revoke', async (c) => {
      const body = await readJson(c);
      const revoked = await admin.revoke(field(body, 'channel'), field(body, 'peerId'));
      return c.json({ revoked });
    });
  };
}
