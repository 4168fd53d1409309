import type { Accounting } from '../accounting/accounting.ts';
import type { LedgerRecord } from '../accounting/ledger-record.ts';
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
  /** Keys the entry's conversation had before re-keying moved it (SPEC §12): its ledger records are filed under them. */
  formerKeys?(entry: SessionEntry): Promise<string[]>;
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
    // Figures derived from the ledger wait (bounded) for its history while that is read (first start on an old
    // ledger); past the wait they are answered partial: `partial: true` in /usage, a header on /metrics.
    app.get('/usage', async (c) => c.json(await accounting.usage()));
    app.get('/metrics', async (c) => {
      const partial = !(await accounting.counted());
      return c.body(await accounting.metrics.text(), 200, { 'content-type': accounting.metrics.contentType, ...(partial ? { 'x-switchboard-partial': 'ledger history still being read' } : {}) });
    });
    // In cluster mode these come from the shared ledger (the same on every replica); see Accounting.
    app.get('/metrics/providers', async (c) => c.json(await accounting.providerUsage()));
    app.get('/admin/providers', async (c) => {
      const limit = limitParam(c.req.query('limit'), 256, 256);
      return c.json({ usage: await accounting.providerUsage(), recentTurns: await accounting.recentTurns(limit) });
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
      const turns = await timelineOf(deps, key, entry, limit);
      if (!entry && turns.length === 0) throw new NotFoundError(`No session ${key}.`, 'session_not_found');
      return c.json({ sessionKey: key, sessionId: entry?.sessionId ?? turns[turns.length - 1]?.sessionId, turns });
    });
  };
}

/**
 * The key's records, oldest first. A conversation re-keying moved also has records under its former keys, and
 * its key may hold another conversation's older records: then the records are those of its session id.
 */
async function timelineOf(deps: StatusRouteDeps, key: string, entry: SessionEntry | undefined, limit: number): Promise<LedgerRecord[]> {
  const turns = await deps.accounting.timeline(key, limit);
  const former = entry && deps.formerKeys ? await deps.formerKeys(entry) : [];
  if (!entry || !former.length) return turns;
  const earlier = await Promise.all([...new Set(former)].filter((k) => k !== key).map((k) => deps.accounting.timeline(k, limit)));
  return [...earlier.flat(), ...turns].filter((r) => r.sessionId === entry.sessionId).sort((a, b) => a.timestamp.localeCompare(b.timestamp)).slice(-limit);
}
