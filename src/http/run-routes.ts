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
  /**
   * Cluster mode: the keys' work on any replica (`running`: a replica holds the session's lock; `waiting`: its
   * accepted messages not done yet), so a run another replica is running shows as running here.
   */
  cluster?(keys: readonly string[]): Promise<ReadonlyMap<string, { running: boolean; waiting: number }>>;
}

/** `GET /admin/runs` and `POST /admin/sessions/:key/stop` (SPEC §7, §11). */
export function mountRunRoutes(deps: RunRouteDeps): (app: HttpApp) => void {
  return (app) => {
    app.get('/admin/runs', async (c) => {
      const entries: SessionEntry[] = [];
      for await (const e of deps.runs()) if (e.runState === 'running' || e.runState === 'continuing') entries.push(e);
      const anywhere = deps.cluster && entries.length ? await deps.cluster(entries.map((e) => e.key)) : undefined;
      const runs = entries.map((e) => {
        const here = deps.lanes.isRunning(e.key);
        const there = anywhere?.get(e.key);
        const turnRunning = here || there?.running === true;
        // Cluster: the messages accepted and not done, less the one running; the local lane's count when higher.
        const queued = Math.max(deps.lanes.depth(e.key), there ? there.waiting - (turnRunning ? 1 : 0) : 0);
        return {
          sessionKey: e.key, sessionId: e.sessionId, agentId: e.agentId, channel: e.channel, runState: e.runState,
          ...(e.goal ? { goal: e.goal } : {}), ...(e.checkpoint ? { checkpoint: e.checkpoint } : {}), ...(e.parentKey ? { parentKey: e.parentKey } : {}),
          turnRunning, queued, updatedAt: e.updatedAt,
        };
      });
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
