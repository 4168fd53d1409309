import type pg from 'pg';
import type { TurnEvents } from '../agent/turn-events.ts';
import type { ProviderTracker, ProviderUsage } from '../accounting/provider-tracker.ts';
import type { Logger } from '../core/logger.ts';
import type { ClusterListener } from './cluster-listener.ts';
import { ClusterEventBus, type ProviderCounters } from './cluster-events.ts';
import { ClusterWebchatRelay } from './cluster-webchat.ts';
import { clusterQueueTotals, clusterRunStates, type ClusterRunState } from './run-states.ts';

/** One provider's figures in `/status` (the shape `StatusSources.providerFigures` gives). */
export interface ProviderFigures {
  requests: number;
  retries: number;
  errors: number;
  totalTokens: number;
  lastError?: ProviderCounters['lastError'];
}

/** This process's failures and retries per provider, from its tracker. */
export function localProviderCounters(tracker: Pick<ProviderTracker, 'usage' | 'providerTotals'>): Record<string, ProviderCounters> {
  const out: Record<string, ProviderCounters> = {};
  for (const id of new Set(tracker.usage().map((u) => u.providerId))) {
    const t = tracker.providerTotals(id);
    if (!t.errors && !t.retries && !t.lastError) continue;
    out[id] = { errors: t.errors, retries: t.retries, ...(t.lastError ? { lastError: t.lastError } : {}) };
  }
  return out;
}

/**
 * `/status` provider figures of the whole cluster: requests and tokens from the shared ledger (`usage`:
 * `Accounting.providerUsage`, which in cluster mode sums `sb_ledger` and adds this process's failures and
 * retries), plus the failures and retries the other replicas reported on `sb_events`.
 */
export function clusterProviderFigures(usage: readonly ProviderUsage[], remote: ReadonlyMap<string, ProviderCounters>, localLastError: (id: string) => ProviderCounters['lastError']): Map<string, ProviderFigures> {
  const figures = new Map<string, ProviderFigures>();
  for (const u of usage) {
    const f = figures.get(u.providerId) ?? { requests: 0, retries: 0, errors: 0, totalTokens: 0 };
    f.requests += u.requests;
    f.retries += u.retries;
    f.errors += u.errors;
    f.totalTokens += u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens;
    figures.set(u.providerId, f);
  }
  for (const [id, c] of remote) {
    const f = figures.get(id) ?? { requests: 0, retries: 0, errors: 0, totalTokens: 0 };
    f.requests += c.errors;
    f.errors += c.errors;
    f.retries += c.retries;
    figures.set(id, f);
  }
  for (const [id, f] of figures) {
    const mine = localLastError(id);
    const theirs = remote.get(id)?.lastError;
    const last = mine && theirs ? (mine.at >= theirs.at ? mine : theirs) : mine ?? theirs;
    if (last) f.lastError = last;
  }
  return figures;
}

/** What {@link startClusterViews} needs: the cluster's shared parts and this replica's runtime and accounting. */
export interface ClusterViewsOptions {
  cluster: { pool: pg.Pool; listener: ClusterListener; replicaId: string };
  /** `runtime.events`. */
  events: TurnEvents;
  /** `accounting`: the shared ledger's provider sums and this process's tracker. */
  accounting: { providerUsage(): Promise<ProviderUsage[]>; providers: Pick<ProviderTracker, 'usage' | 'providerTotals'> };
  logger: Logger;
  /** `config.cluster.pollMs`. */
  pollMs: number;
  /** Session changes are gathered this long into one notification (default 250 ms). */
  flushMs?: number;
}

/** What pages and clients read from the whole cluster; each member is passed where main.ts builds the page. */
export interface ClusterViews {
  /** `DashboardEvents`' `remote`: session changes on other replicas, while a page here watches. */
  dashboard: { subscribe(onSession: (key: string, reason: string) => void): () => void; watch(open: boolean): void };
  /** `mountRunRoutes`' `cluster`: the run state of keys on any replica. */
  runStates(keys: readonly string[]): Promise<Map<string, ClusterRunState>>;
  /** `buildStatusReport`'s `clusterQueue`: sessions running and messages waiting in the shared queue. */
  queueTotals(): Promise<{ running: number; waiting: number }>;
  /** `buildStatusReport`'s `providerFigures`: per provider, the cluster's requests, tokens, failures and retries. */
  providerFigures(): Promise<Map<string, ProviderFigures>>;
  /** `mountWebchatRoutes`' `laterReplies`: replies to this replica's web chat pages of work run on other replicas. */
  webchat: ClusterWebchatRelay;
  close(): Promise<void>;
}

/**
 * Starts what makes a page or client of this replica see the whole cluster (SPEC §13): the `sb_events` bus
 * (dashboard session changes, provider failures), the web chat relay (later replies, read from `sb_inbox`),
 * the run states (the lock table) and the provider figures (the shared ledger). Call once the runtime and the
 * accounting exist; {@link ClusterViews.close} at shutdown, before the cluster's pool closes.
 */
export function startClusterViews(options: ClusterViewsOptions): ClusterViews {
  const { cluster, events, accounting, logger } = options;
  const bus = new ClusterEventBus({
    pool: cluster.pool, listener: cluster.listener, replicaId: cluster.replicaId, logger, events,
    localProviders: () => localProviderCounters(accounting.providers), ...(options.flushMs !== undefined ? { flushMs: options.flushMs } : {}),
  });
  const webchat = new ClusterWebchatRelay({ pool: cluster.pool, listener: cluster.listener, replicaId: cluster.replicaId, logger, events, pollMs: options.pollMs });
  return {
    dashboard: { subscribe: (onSession) => bus.onSessionChange(onSession), watch: (open) => bus.watch(open) },
    runStates: (keys) => clusterRunStates(cluster.pool, keys),
    queueTotals: () => clusterQueueTotals(cluster.pool),
    providerFigures: async () => clusterProviderFigures(await accounting.providerUsage(), bus.remoteProviderCounters(), (id) => accounting.providers.providerTotals(id).lastError),
    webchat,
    close: async () => {
      webchat.close();
      await bus.close();
    },
  };
}
