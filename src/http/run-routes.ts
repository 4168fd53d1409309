import { NotFoundError } from '../core/errors.ts';
import { keyParam } from './admin-routes.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { HttpApp } from './app.ts';

/** What the run routes read and change. */
export interface RunRouteDeps {
  /** Every stored session (live entries where active). */
  runs(): AsyncIterable<SessionEntry>;
  lanes: { isRunning(key: string): boolean; depth(key: string): number };
  /** `/stop` for a key: aborts its running turn and pauses its goal run; undefined when the key is unknown. */
  stop(key: string): Promise<{ entry: SessionEntry; stopped: boolean } | undefined>;
}

/** `GET /admin/runs` and `POST /admin/sessions/:key/stop` (SPEC §7, §11). */
export function mountRunRoutes(deps: RunRouteDeps): (app: HttpApp) => void {
  return (app) => {
    app.get('/admin/runs', async (c) => {
      const runs = [];
      for await (const e of deps.runs()) {
        if (e.runState !== 'running' && e.runState !== 'continuing') continue;
        runs.push({
          sessionKey: e.key, sessionId: e.sessionId, agentId: e.agentId, channel: e.channel, runState: e.runState,
          ...(e.goal ? { goal: e.goal } : {}), ...(e.checkpoint ? { checkpoint: e.checkpoint } : {}), ...(e.parentKey ? { parentKey: e.parentKey } : {}),
          turnRunning: deps.lanes.isRunning(e.key), queued: deps.lanes.depth(e.key), updatedAt: e.updatedAt,
        });
      }
      return c.json({ runs });
    });
    app.post('/admin/sessions/:key/stop', async (c) => {
      const key = keyParam(c.req.param('key'));
      const result = await deps.stop(key);
      if (!result) throw new NotFoundError(`No session ${key}.`, 'session_not_found');
      return c.json({ sessionKey: key, stopped: result.stopped, runState: result.entry.runState, ...(result.entry.goal ? { goal: result.entry.goal } : {}) });
    });
  };
}
