import type { Accounting } from '../accounting/accounting.ts';
import type { StatusReport } from '../accounting/status-report.ts';
import { BadRequestError, NotFoundError } from '../core/errors.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { HttpApp } from './app.ts';

/** What the status, usage, metrics and provider routes read. */
export interface StatusRouteDeps {
  accounting: Accounting;
  status(): Promise<StatusReport>;
  /** The live or stored entry of a key. */
  sessionEntry(key: string): Promise<SessionEntry | undefined>;
}

function limitParam(value: string | undefined, fallback: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new BadRequestError(`"limit" must be a positive integer, got "${value}".`, 'invalid_parameter');
  return Math.min(n, max);
}

/** `/status`, `/usage`, `/metrics`, `/metrics/providers`, `/admin/providers`, `/admin/sessions/:key/timeline` (SPEC §7). */
export function mountStatusRoutes(deps: StatusRouteDeps): (app: HttpApp) => void {
  const { accounting } = deps;
  return (app) => {
    app.get('/status', async (c) => c.json(await deps.status()));
    // Figures derived from the ledger wait for its history when that is still being read (first start on an old ledger).
    const counted = () => accounting.ready.catch(() => undefined);
    app.get('/usage', async (c) => {
      await counted();
      return c.json(accounting.totals.snapshot());
    });
    app.get('/metrics', async (c) => {
      await counted();
      return c.body(await accounting.metrics.text(), 200, { 'content-type': accounting.metrics.contentType });
    });
    app.get('/metrics/providers', async (c) => {
      await counted();
      return c.json(accounting.providers.usage());
    });
    app.get('/admin/providers', async (c) => {
      await counted();
      const limit = limitParam(c.req.query('limit'), 256, 256);
      return c.json({ usage: accounting.providers.usage(), recentTurns: accounting.providers.recent(limit) });
    });
    app.get('/admin/sessions/:key/timeline', async (c) => {
      const raw = c.req.param('key');
      let key: string;
      try {
        key = parseSessionKey(raw).key;
      } catch {
        throw new BadRequestError(`"${raw}" is not a session key (expected agent:<agentId>:...).`, 'invalid_session_key');
      }
      const limit = limitParam(c.req.query('limit'), 100, 1000);
      const entry = await deps.sessionEntry(key);
      // Newest first from the file's end, then oldest first for the timeline.
      const turns = (await accounting.ledger.readBackwards((r) => r.sessionKey === key, limit, { contains: `"sessionKey":${JSON.stringify(key)}`, sessionKey: key })).reverse();
      if (!entry && turns.length === 0) throw new NotFoundError(`No session ${key}.`, 'session_not_found');
      return c.json({ sessionKey: key, sessionId: entry?.sessionId ?? turns[turns.length - 1]?.sessionId, turns });
    });
  };
}
