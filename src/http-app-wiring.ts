import type { StatusReport } from './accounting/status-report.ts';
import type { Accounting } from './accounting/accounting.ts';
import type { ClusterViews } from './cluster/cluster-views.ts';
import type { ResolvedConfig } from './config/resolved.ts';
import type { AgentRuntime } from './agent/runtime.ts';
import type { ChannelAdapter } from './core/channel-adapter.ts';
import type { Clock } from './core/clock.ts';
import type { Logger } from './core/logger.ts';
import type { Gateway } from './gateway/gateway.ts';
import type { RateBuckets } from './gateway/rate-buckets.ts';
import { mountAdminRoutes } from './http/admin-routes.ts';
import { createHttpApp, type HttpApp } from './http/app.ts';
import { mountCliRoutes } from './http/cli-routes.ts';
import type { DashboardAuth } from './http/dashboard-auth.ts';
import type { DashboardEvents } from './http/dashboard-events.ts';
import { mountDashboard } from './http/dashboard.ts';
import { mountHookRoutes, withHookAuthExemption } from './http/hook-routes.ts';
import { mountJobRoutes } from './http/job-routes.ts';
import { mountMediaRoutes } from './http/media-routes.ts';
import { mediaBodyLimits } from './http/media-upload.ts';
import { mountOpenAIRoutes } from './http/openai-routes.ts';
import { mountPairingRoutes } from './http/pairing-routes.ts';
import { mountReadyRoute, type ReadinessSources } from './http/ready-route.ts';
import { mountRunRoutes } from './http/run-routes.ts';
import { mountStatusRoutes } from './http/status-routes.ts';
import { mountWebchatRoutes, type WebchatEndpoint } from './http/webchat-routes.ts';
import type { MediaStore } from './media/media-store.ts';
import { pairingAdmin } from './routing/pairing-admin.ts';
import type { PairingStore } from './routing/pairing.ts';
import type { Scheduler } from './scheduler/scheduler.ts';
import type { SessionManager } from './sessions/manager.ts';
import { allSessions } from './sessions/scan.ts';
import type { KeyvSessionStore } from './sessions/store.ts';
import type { TranscriptStore } from './sessions/transcript.ts';

/** What the HTTP app is built from: the running parts of the gateway (see `src/main.ts`). */
export interface HttpAppParts {
  config: ResolvedConfig;
  clock: Clock;
  logger: Logger;
  startedAt: number;
  adapters: readonly ChannelAdapter[];
  gateway: Gateway;
  runtime: AgentRuntime;
  scheduler: Scheduler;
  store: KeyvSessionStore;
  sessions: SessionManager;
  transcripts: TranscriptStore;
  accounting: Accounting;
  mediaStore: MediaStore;
  pairing: PairingStore;
  /** The web chat channels (each gets its routes). */
  webchats: readonly WebchatEndpoint[];
  /** The session key of a web chat user's messages. */
  webchatKeyOf: (user: string) => string;
  /** Cluster mode: the senders' shared rate-limit buckets (webhooks use them too). */
  rateBuckets?: RateBuckets;
  /** Cluster mode: what pages see of the other replicas. */
  views?: ClusterViews;
  status(): Promise<StatusReport>;
  ready: ReadinessSources;
  dashboardAuth: DashboardAuth;
  live: DashboardEvents;
  /** The keys a session id was known by before re-keying. */
  formerKeys(entry: { sessionId: string }): Promise<string[]>;
}

/** Every route of the gateway (SPEC §7), on one Hono app: hooks first, then admin, API, chat, media, dashboard. */
export function buildHttpApp(parts: HttpAppParts): HttpApp {
  const { config, clock, logger, startedAt, adapters, gateway, runtime, scheduler, store, sessions, transcripts, accounting, mediaStore, pairing } = parts;
  const { rateBuckets, views, ready, dashboardAuth, live } = parts;
  const status = () => parts.status();
  const formerKeys = (entry: { sessionId: string }) => parts.formerKeys(entry);
  return createHttpApp({
    authToken: config.gateway.authToken,
    maxBodyBytes: config.gateway.maxBodyBytes,
    bodyLimits: mediaBodyLimits(config.gateway.maxBodyBytes, config.media),
    host: config.gateway.host,
    allowedHosts: config.gateway.allowedHosts,
    browserAuth: withHookAuthExemption(config.hooks.token, (c) => dashboardAuth.verdict(c)),
    logger,
    channelRoutes: adapters.flatMap((a) => a.routes?.() ?? []),
    mounts: [
      // First, so that no other route takes /hooks/* before its own token is checked.
      mountHookRoutes({ token: config.hooks.token, sink: gateway.sink, jobs: scheduler, config, clock, logger, rateBuckets, onRefusal: (e) => runtime.events.emit('onRefusal', e) }),
      mountJobRoutes({ jobs: scheduler }),
      mountAdminRoutes({ store, sessions, transcripts, resetSession: (key) => gateway.runOnLane(key, () => runtime.resetByKey(key, 'admin')),
        compactSession: (key) => gateway.runOnLane(key, (signal) => runtime.compactByKey(key, signal)), budgetOf: (entry) => runtime.agentFor(entry.agentId).tokenBudget }),
      mountOpenAIRoutes({
        config, sink: gateway.sink, events: runtime.events, clock, logger, startedAt, isClosing: () => gateway.isClosing,
        flushLedger: () => accounting.flush(), authToken: config.gateway.authToken, media: mediaStore, mediaConfig: config.media, maxBodyBytes: config.gateway.maxBodyBytes,
      }),
      mountCliRoutes({ sink: gateway.sink, clock }),
      ...parts.webchats.map((channel) => mountWebchatRoutes({
        channel, sessionKeyFor: parts.webchatKeyOf, sessionExists: async (key) => (await sessions.get(key)) !== undefined,
        authToken: config.gateway.authToken, media: mediaStore, mediaConfig: config.media, maxBodyBytes: config.gateway.maxBodyBytes,
        ...(views ? { laterReplies: views.webchat } : {}),
      })),
      mountMediaRoutes({ media: mediaStore }),
      mountPairingRoutes(pairingAdmin(pairing, config), logger),
      mountReadyRoute(ready),
      mountRunRoutes({
        runs: () => allSessions(store, sessions), lanes: gateway.lanes, stop: (key) => runtime.stopByKey(key),
        ...(views ? { cluster: (keys: readonly string[]) => views.runStates(keys) } : {}),
      }),
      mountStatusRoutes({ accounting, status, sessionEntry: (key) => sessions.get(key), formerKeys }),
      mountDashboard({ auth: dashboardAuth, live }),
    ],
  });
}
