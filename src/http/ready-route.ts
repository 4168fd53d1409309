import type { ChannelStatusReport } from '../accounting/status-report.ts';
import type { HttpApp } from './app.ts';

/** One reason the gateway is not ready. */
export interface NotReadyPart {
  part: 'store' | 'channel' | 'gateway' | 'mcp';
  /** `telegram/default` for a channel, the server's name for an MCP server. */
  name: string;
  error: string;
  /** Channels: the adapter status and the supervisor's state (connecting, retrying, gave-up). */
  status?: string;
  /** Also an MCP server's state (`connecting`). */
  state?: string;
  nextRetryAt?: string;
}

/** What `GET /readyz` checks. */
export interface ReadinessSources {
  /** Resolves when the session store answers a read. */
  pingStore(): Promise<void>;
  /** Every enabled channel account. */
  channels(): ChannelStatusReport[];
  /** Every enabled MCP server and its state. */
  mcp?(): readonly { name: string; state: string }[];
  isClosing(): boolean;
  /** Longest wait for the store (default 2 s). */
  storeTimeoutMs?: number;
}

/** What {@link readiness} finds: `GET /readyz` answers 200 when `ready`, else 503 with `failing`. */
export interface ReadinessReport {
  ready: boolean;
  failing: NotReadyPart[];
}

/**
 * The readiness report (SPEC §7, §11): ready when the store is reachable, every enabled channel is connected
 * (or, in cluster mode, standing by while another replica holds its lease) and every enabled MCP server has
 * finished its first attempt, ready or failed (a later reconnect does not make the gateway unready).
 */
export async function readiness(sources: ReadinessSources): Promise<ReadinessReport> {
  const failing: NotReadyPart[] = [];
  if (sources.isClosing()) failing.push({ part: 'gateway', name: 'gateway', error: 'shutting down' });
  const ms = sources.storeTimeoutMs ?? 2000;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      sources.pingStore(),
      new Promise((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms (timed out)`)), ms); }),
    ]);
  } catch (error) {
    failing.push({ part: 'store', name: 'store', error: (error as Error).message.split('\n')[0]! });
  } finally {
    clearTimeout(timer);
  }
  for (const c of sources.channels()) {
    // A standby channel (cluster mode: another replica holds its lease) is ready: it takes over when needed.
    if (c.status === 'running' || c.status === 'standby' || c.status === 'disabled') continue;
    const s = c.supervision;
    failing.push({
      part: 'channel', name: `${c.id}/${c.accountId}`, status: c.status,
      error: s?.lastError ?? c.detail ?? (c.status === 'starting' ? 'connecting' : c.status),
      ...(s ? { state: s.state } : {}), ...(s?.nextRetryAt ? { nextRetryAt: s.nextRetryAt } : {}),
    });
  }
  for (const m of sources.mcp?.() ?? []) {
    if (m.state === 'connecting') failing.push({ part: 'mcp', name: m.name, state: m.state, error: 'connecting' });
  }
  return { ready: failing.length === 0, failing };
}

/** `GET /readyz`: 200 `{ ready: true }`, or 503 `{ ready: false, failing: [...] }`. `/healthz` stays liveness only. */
export function mountReadyRoute(sources: ReadinessSources): (app: HttpApp) => void {
  return (app) => {
    app.get('/readyz', async (c) => {
      const report = await readiness(sources);
      c.header('cache-control', 'no-store');
      return report.ready ? c.json({ ready: true }) : c.json({ ready: false, failing: report.failing }, 503);
    });
  };
}
