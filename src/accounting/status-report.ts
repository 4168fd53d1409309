import type { ChannelStatus } from '../core/channel-adapter.ts';
import type { ProviderFailure, ProviderTracker } from './provider-tracker.ts';
import type { DeliveryFailure } from '../core/delivery-retry.ts';
import type { JobView } from '../scheduler/jobs.ts';
import type { FailoverReport } from './failover-tracker.ts';

/** One channel account in `GET /status`. */
export interface ChannelStatusReport {
  id: string;
  accountId: string;
  status: ChannelStatus;
  /** Why a channel failed. */
  detail?: string;
  /** The supervisor's view: connecting, connected, retrying (with the next attempt's time) or gave-up. */
  supervision?: { state: string; attempts: number; lastError?: string; nextRetryAt?: string; connectedAt?: string };
}

/** One configured provider in `GET /status`. */
export interface ProviderStatusReport {
  id: string;
  kind: string;
  model: string;
  contextWindow: number;
  requests: number;
  retries: number;
  errors: number;
  totalTokens: number;
  lastError?: ProviderFailure;
}

/** `GET /status` (SPEC §7), also shown by the `/status` chat command. */
export interface StatusReport {
  version: string;
  uptimeSeconds: number;
  channels: ChannelStatusReport[];
  sessions: { active: number; persisted: number | null };
  providers: ProviderStatusReport[];
  /** Turns running now and messages waiting on session lanes (cluster mode: on every replica). */
  queue: { running: number; queued: number };
  /** Each MCP server: connecting, ready or failed (with the reason), and its tool count. */
  mcp: McpStatusReport[];
  /** Cluster mode: this replica's id and the live replicas (SPEC §13). */
  cluster?: { replicaId: string; replicas: unknown[] };
  /** Replies given up on after the channel's retries (SPEC §16), by `channel/account`, and the latest ones. */
  deliveries?: { failed: Record<string, number>; recent: DeliveryFailure[] };
  /** Scheduled jobs (SPEC §17): how many, how many paused, the next due time, the latest runs (newest first). */
  jobs?: JobsStatusReport;
  /** Calls that moved to another key or model, and the keys cooling down (SPEC §18). */
  failovers?: FailoverReport;
}

/** The jobs part of `GET /status`; times are ISO strings. */
export interface JobsStatusReport {
  count: number;
  paused: number;
  nextRunAt?: string;
  /** The last run of each job that ran, newest first, at most {@link RECENT_JOB_RUNS}. */
  recent: { jobId: string; at: string; outcome: string }[];
  /** Set when the jobs could not be listed. */
  error?: string;
}

/** How many recent job runs `/status` lists. */
export const RECENT_JOB_RUNS = 10;

/** One MCP server in `GET /status`. */
export interface McpStatusReport {
  name: string;
  transport: string;
  state: string;
  tools: number;
  error?: string;
}

/** What the status report is read from. */
export interface StatusSources {
  version: string;
  startedAt: number;
  now(): number;
  channels(): ChannelStatusReport[];
  activeSessions(): number;
  /** Entries in the session store. */
  persistedSessions(): Promise<number>;
  providers: readonly { id: string; kind: string; model: string; contextWindow: number }[];
  tracker: ProviderTracker;
  queue(): { running: number; queued: number };
  /**
   * Cluster mode: the shared queue's sessions running and messages waiting (the running ones included), on every
   * replica; the report shows the larger of these and this replica's own figures.
   */
  clusterQueue?(): Promise<{ running: number; waiting: number }>;
  mcp?(): McpStatusReport[];
  /** Cluster mode: the live replicas. */
  cluster?(): Promise<{ replicaId: string; replicas: unknown[] }>;
  /** Replies given up on. */
  deliveries?(): { byChannel: Record<string, number>; recent: DeliveryFailure[] };
  /** Scheduled jobs (the scheduler's `JobsService.list`). */
  jobs?(): Promise<JobView[]>;
  /** Failovers and cooldowns. */
  failovers?(): FailoverReport;
  /**
   * Cluster mode: each provider's requests, retries, errors and tokens of the whole cluster (the shared ledger and
   * the other replicas' failures); used instead of `tracker`'s, which counts this process only.
   */
  providerFigures?(): Promise<ReadonlyMap<string, { requests: number; retries: number; errors: number; totalTokens: number; lastError?: ProviderFailure }>>;
}

/** Builds the status report; a store that cannot count gives `persisted: null` rather than failing. */
export async function buildStatusReport(sources: StatusSources): Promise<StatusReport> {
  const persisted = await sources.persistedSessions().catch(() => null);
  // A failing read of the cluster's figures falls back to this process's own rather than failing the report.
  const figures = sources.providerFigures ? await sources.providerFigures().catch(() => undefined) : undefined;
  const shared = sources.clusterQueue ? await sources.clusterQueue().catch(() => undefined) : undefined;
  return {
    version: sources.version,
    uptimeSeconds: Math.max(0, Math.floor((sources.now() - sources.startedAt) / 1000)),
    channels: sources.channels(),
    sessions: { active: sources.activeSessions(), persisted },
    providers: sources.providers.map((p) => {
      if (figures) {
        const f = figures.get(p.id);
        return {
          id: p.id, kind: p.kind, model: p.model, contextWindow: p.contextWindow,
          requests: f?.requests ?? 0, retries: f?.retries ?? 0, errors: f?.errors ?? 0, totalTokens: f?.totalTokens ?? 0,
          ...(f?.lastError ? { lastError: f.lastError } : {}),
        };
      }
      const t = sources.tracker.providerTotals(p.id);
      return {
        id: p.id, kind: p.kind, model: p.model, contextWindow: p.contextWindow,
        requests: t.requests, retries: t.retries, errors: t.errors,
        totalTokens: t.inputTokens + t.outputTokens + t.cacheReadTokens + t.cacheWriteTokens,
        ...(t.lastError ? { lastError: t.lastError } : {}),
      };
    }),
    queue: queueFigures(sources.queue(), shared),
    mcp: sources.mcp?.() ?? [],
    ...(sources.deliveries ? { deliveries: deliveriesOf(sources.deliveries()) } : {}),
    ...(sources.failovers ? { failovers: sources.failovers() } : {}),
    ...(sources.jobs ? { jobs: await sources.jobs().then(jobsReport, (err: unknown) => ({ count: 0, paused: 0, recent: [], error: String((err as Error).message) })) } : {}),
    ...(sources.cluster ? { cluster: await sources.cluster().catch((err: unknown) => ({ replicaId: '', replicas: [], error: String((err as Error).message) })) } : {}),
  };
}

/** This replica's queue figures, or the shared queue's where they are larger (cluster mode). */
function queueFigures(local: { running: number; queued: number }, shared: { running: number; waiting: number } | undefined): { running: number; queued: number } {
  if (!shared) return local;
  return { running: Math.max(local.running, shared.running), queued: Math.max(local.queued, shared.waiting - shared.running) };
}

function deliveriesOf(d: { byChannel: Record<string, number>; recent: DeliveryFailure[] }): NonNullable<StatusReport['deliveries']> {
  return { failed: d.byChannel, recent: d.recent };
}

/** Counts, the soonest next run and the latest runs of a job list. */
export function jobsReport(views: readonly JobView[]): JobsStatusReport {
  const next = views.map((v) => v.nextRunAt).filter((t): t is number => t !== undefined && Number.isFinite(t));
  const recent = views
    .filter((v) => v.state.lastRunAt !== undefined && v.state.lastOutcome !== undefined)
    .sort((a, b) => (b.state.lastRunAt ?? 0) - (a.state.lastRunAt ?? 0))
    .slice(0, RECENT_JOB_RUNS)
    .map((v) => ({ jobId: v.job.id, at: new Date(v.state.lastRunAt ?? 0).toISOString(), outcome: v.state.lastOutcome ?? '' }));
  return {
    count: views.length,
    paused: views.filter((v) => v.state.paused).length,
    ...(next.length ? { nextRunAt: new Date(Math.min(...next)).toISOString() } : {}),
    recent,
  };
}
