import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { ServerType } from '@hono/node-server';
import { closeGracefully, listen } from './http/serve.ts';
import { createChannelAdapters } from '../channels/index.ts';
import { Accounting } from './accounting/accounting.ts';
import { buildStatusReport, type StatusReport } from './accounting/status-report.ts';
import { registerGatewayCommands } from './agent/commands/builtin-commands.ts';
import { registerCheckedCommands } from './agent/commands/checked-commands.ts';
import { turnLogObserver } from './accounting/turn-log.ts';
import { AgentRuntime } from './agent/runtime.ts';
import { preloadTokenizers } from './tokens/tokens.ts';
import type { ResolvedConfig } from './config/resolved.ts';
import type { ChannelAdapter } from './core/channel-adapter.ts';
import { systemClock, type Clock } from './core/clock.ts';
import { ConfigError } from './core/errors.ts';
import { createLogger, type Logger } from './core/logger.ts';
import { installProcessGuard } from './core/process-guard.ts';
import { StateLock, type StateOwner } from './core/state-lock.ts';
import { ChannelSupervisor, type ChannelSupervisorOptions } from './gateway/channel-supervisor.ts';
import { Gateway } from './gateway/gateway.ts';
import type { QueueTimers } from './gateway/queue-mode.ts';
import { Inbox } from './gateway/inbox.ts';
import type { TypingTimers } from './gateway/typing-loop.ts';
import { resumeInterruptedRuns } from './gateway/resume.ts';
import { formerKeysOf, rekeyIfRoutingChanged, type RekeyDeps } from './gateway/rekey.ts';
import { createToolRegistry } from './tools/index.ts';
import { McpHub } from './tools/mcp/mcp-hub.ts';
import type { TimeoutHandle } from './tools/timeout.ts';
import { allSessions } from './sessions/scan.ts';
import type { HttpApp } from './http/app.ts';
import { isWebchatChannel, webchatMessage } from '../channels/webchat/index.ts';
import { buildHttpApp } from './http-app-wiring.ts';
import { createDashboardAuth } from './http/dashboard-auth.ts';
import { DashboardEvents } from './http/dashboard-events.ts';
import { readiness, type ReadinessSources } from './http/ready-route.ts';
import { createProviders } from './providers/registry.ts';
import { ModelChains } from './providers/model-chains.ts';
import { FailoverTracker } from './accounting/failover-tracker.ts';
import { dmScopeWarning } from './routing/dm-scope-warning.ts';
import { pairingAdmin } from './routing/pairing-admin.ts';
import { SessionManager } from './sessions/manager.ts';
import { expiresAt } from './sessions/reset.ts';
import type { KeyvSessionStore } from './sessions/store.ts';
import { openJobStore, openMediaStore, openPairingStore, openSessionStore } from './stores.ts';
import { scheduledWork, type ScheduledWork } from './scheduled-work.ts';
import { MediaIntake } from './agent/media-intake.ts';
import { startHousekeeping } from './housekeeping.ts';
import { closePdfWorkers } from './media/document-text.ts';
import { AgentTranscriptStores } from './sessions/agent-transcripts.ts';
import { isClusterStore } from './cluster/pg-database.ts';
import { openClusterMode, type ClusterMode } from './cluster/cluster-mode.ts';
import { PgTranscriptStore, watchTranscriptChanges } from './cluster/pg-transcript-store.ts';
import { readOnClaim } from './cluster/claim-read.ts';
import type { Fence } from './cluster/fence.ts';
import { ClusterResumes } from './cluster/cluster-resume.ts';
import { clusterFormerKeys, clusterRekeyIfRoutingChanged } from './cluster/cluster-rekey.ts';
import { PgGroupContext } from './cluster/pg-group-context.ts';
import { PgLedgerSink } from './cluster/pg-ledger-sink.ts';
import { PgChannelWatermarks } from './cluster/channel-watermarks.ts';
import { PgChannelLeases } from './cluster/leader-lease.ts';
import { startClusterViews, type ClusterViews } from './cluster/cluster-views.ts';
import { PgRateBuckets } from './cluster/pg-rate-buckets.ts';
import { withDeadline, type DeadlineTimers } from './core/deadline.ts';

/** Where transcripts live: JSONL files per agent on one machine, the shared database in a cluster. */
export type Transcripts = AgentTranscriptStores | PgTranscriptStore;

export const VERSION = '0.1.0';

/** Options of {@link startGateway}. */
export interface StartOptions {
  config: ResolvedConfig;
  clock?: Clock;
  logger?: Logger;
  /** Serve HTTP (default true). */
  listen?: boolean;
  /** Replace the configured channels (tests, `switchboard chat`). */
  adapters?: ChannelAdapter[];
  /** First reconnect delay of MCP servers (default 1 s). */
  mcpReconnectBaseMs?: number;
  /** The bound of a turn's wait for MCP servers still connecting (tests fire it themselves). */
  mcpWaitTimeout?: (ms: number) => TimeoutHandle;
  /** The timer of tool calls and `sessions_yield` waits (tests fire it themselves). */
  toolTimeout?: (ms: number) => TimeoutHandle;
  /** Who takes the state folder's lock (default: a gateway when listening, else `switchboard chat`). */
  owner?: Pick<StateOwner, 'role' | 'command'>;
  /** How long to wait for the state lock held by a short CLI command (default 2 s). */
  lockWaitMs?: number;
  /** The wait after a poll that brought nothing readable (tests make it short; see ChannelFactoryContext). */
  pollBackoff?: { baseMs?: number; maxMs?: number };
  /** Channel retry timers, backoff and watch period (tests). */
  supervision?: Pick<ChannelSupervisorOptions, 'timers' | 'backoff' | 'random' | 'watchMs'>;
  /** Timers of the typing refresh (tests fire them themselves). */
  typingTimers?: TypingTimers;
  /** Timers of the queue mode `collect` debounce (tests fire them themselves). */
  queueTimers?: QueueTimers;
  /** Timers of media download deadlines (tests fire them themselves). */
  mediaTimers?: DeadlineTimers;
  /** Timers of job due times and heartbeats (tests fire them themselves). */
  schedulerTimers?: DeadlineTimers;
  /** Re-keying at start (tests): `afterStep` is called after each step, so a test can crash it half-way. */
  rekeyHooks?: Pick<RekeyDeps, 'afterStep'>;
}

/** A running gateway. */
export interface RunningGateway {
  config: ResolvedConfig;
  /** `http://host:port` when listening. */
  url?: string;
  port?: number;
  gateway: Gateway;
  runtime: AgentRuntime;
  sessions: SessionManager;
  store: KeyvSessionStore;
  transcripts: Transcripts;
  adapters: ChannelAdapter[];
  logger: Logger;
  startedAt: number;
  /** Token ledger, runtime totals, provider tracker, metrics. */
  accounting: Accounting;
  /** Keeps the channels connected: state, attempts and last error of each. */
  supervisor: ChannelSupervisor;
  /** The HTTP app (every route), for in-process requests (`app.request()`). */
  app: HttpApp;
  /** What `GET /status` answers. */
  status(): Promise<StatusReport>;
  /** Stops intake, finishes or checkpoints running turns, flushes every write, closes everything. */
  stop(): Promise<void>;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|::1|\[::1\])$/;

/** The chat commands, as platforms list them (`setMyCommands`). */
function chatCommands(runtime: AgentRuntime, config: ResolvedConfig): { command: string; description: string }[] {
  const triggers = config.session.resetTriggers.filter((t) => /^\/[a-z0-9_]{1,32}$/.test(t)).map((t) => ({ command: t.slice(1), description: 'start a new session' }));
  return [...triggers, ...runtime.commands.list().map((c) => ({ command: c.name, description: c.description }))];
}

/**
 * The one wiring point: state lock → config → store → runtime → channels → HTTP. Throws StateLockedError
 * when another process owns the state folder.
 */
export async function startGateway(options: StartOptions): Promise<RunningGateway> {
  const owner = options.owner ?? (options.listen === false ? { role: 'cli' as const, command: 'switchboard chat' } : { role: 'gateway' as const, command: 'switchboard start' });
  const lock = await StateLock.acquire(options.config.stateDir, owner, { waitMs: options.lockWaitMs ?? 2000 });
  // What start-up opened, closed again in reverse order when a later step fails (a port in use, a bad channel).
  const opened: (() => unknown)[] = [];
  try {
    return await wire(options, lock, opened);
  } catch (error) {
    for (const close of opened.reverse()) await Promise.resolve().then(close).catch(() => undefined);
    await lock.release();
    throw error;
  }
}

async function wire(options: StartOptions, lock: StateLock, opened: (() => unknown)[]): Promise<RunningGateway> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const startedAt = clock.now();
  const logger = options.logger ?? createLogger({ level: config.logLevel, secrets: config.secrets });
  if (options.listen !== false && !LOOPBACK.test(config.gateway.host) && !config.gateway.authToken) {
    throw new ConfigError(`gateway.host is ${config.gateway.host}, which is reachable from other machines, but gateway.authToken is empty. Set SWITCHBOARD_AUTH_TOKEN (or gateway.authToken), or bind to 127.0.0.1.`);
  }
  mkdirSync(config.stateDir, { recursive: true });
  let gateway!: Gateway;
  let claimRead!: (key: string, fence: Fence) => Promise<void>;
  // Cluster mode (SPEC §13): the shared database, the session locks and the work queue come first.
  const cluster: ClusterMode | undefined = isClusterStore(config.store)
    ? await openClusterMode(config, logger, {
      onLockLost: (key) => gateway.lanes.stop(key, 'lock lost'),
      // A claimed session may have been advanced by another replica: its entry and transcript are read again.
      onClaim: (key, fence) => claimRead(key, fence),
    })
    : undefined;
  if (cluster) opened.push(() => cluster.close());
  const store = await openSessionStore(config.store, { pool: cluster?.pool });
  opened.push(() => store.close());
  const transcripts: Transcripts = cluster
    ? new PgTranscriptStore({ pool: cluster.pool, logger })
    // Every session that may run at once keeps its transcript open (at 256 at once, 64 open files cost an open and
    // a close per append: 1–4 % of the CPU per message).
    : new AgentTranscriptStores({ stateDir: config.stateDir, agentIds: config.agents.map((a) => a.id), logger, handleLimit: Math.max(64, 2 * config.agentDefaults.maxConcurrent) });
  if (cluster && transcripts instanceof PgTranscriptStore) watchTranscriptChanges(transcripts, cluster.listener);
  let runtime!: AgentRuntime;
  const sessions = new SessionManager({
    store, transcripts, clock, logger,
    maxActiveSessions: config.session.maxActiveSessions,
    expiresAt: (entry) => expiresAt(runtime.resetPolicyOf(entry), entry.updatedAt),
    readThrough: Boolean(cluster),
  });
  if (transcripts instanceof PgTranscriptStore) claimRead = readOnClaim({ sessions, store, transcripts, logger });
  const providers = createProviders(config);
  const failovers = new FailoverTracker(() => models.cooldowns.snapshot());
  const models = new ModelChains({ providers: config.providers, registry: providers, clock, onFailover: (step) => failovers.record(step) });
  let work: ScheduledWork | undefined;
  const tools = createToolRegistry({
    config, sessions, reader: { get: (key) => sessions.get(key), all: () => allSessions(store, sessions) },
    sink: () => gateway.sink, history: (entry) => transcripts.read(entry.sessionId), timeout: options.toolTimeout,
    arrivalTimeout: options.mcpWaitTimeout, jobs: () => work?.scheduler,
  });
  const mediaStore = openMediaStore({ stateDir: config.stateDir, logger, pool: cluster?.pool });
  opened.push(() => mediaStore.close?.());
  const media = new MediaIntake({
    config, store: mediaStore, now: () => clock.now(), ...(options.mediaTimers ? { timers: options.mediaTimers } : {}),
    fetch: (message, attachment, fetchOptions) => gateway.adapterFor(message.channel, message.accountId)?.fetchMedia?.(attachment, fetchOptions),
    transcriberOf: (agent) => providers.get(config.media.transcription.provider ?? agent.providerId),
  });
  runtime = new AgentRuntime({ config, sessions, transcripts, providers, models, clock, logger, tools, media, mediaStore });
  // Re-keying (SPEC §12) moves transcript files on one machine; a cluster re-keys once, in one transaction under a database lock.
  opened.push(() => transcripts.close());
  if (transcripts instanceof AgentTranscriptStores) await rekeyIfRoutingChanged(config, store, transcripts, logger, clock.now(), options.rekeyHooks);
  else if (cluster) await clusterRekeyIfRoutingChanged(config, cluster.pool, { logger, afterStep: options.rekeyHooks?.afterStep });
  const mcp = new McpHub({ config, registry: tools, logger, reconnectBaseMs: options.mcpReconnectBaseMs });
  // One machine journals accepted messages to inbox.jsonl; a cluster queues them in the shared database.
  const inbox = cluster ? undefined : new Inbox({ file: path.join(config.stateDir, 'inbox.jsonl'), clock, logger });
  opened.push(() => inbox?.close());
  const pending = inbox?.open() ?? [];
  const pairing = openPairingStore(config.store, { clock, pool: cluster?.pool });
  opened.push(() => pairing.close());
  // Cluster mode: a sender's rate-limit bucket is shared by the replicas (one statement per limited message).
  const rateBuckets = cluster ? new PgRateBuckets({ pool: cluster.pool, logger }) : undefined;
  gateway = new Gateway({ config, runtime, clock, logger, inbox, pairing, mediaStore, rateBuckets, typingTimers: options.typingTimers, queueTimers: options.queueTimers, ...(cluster ? {
    queue: cluster.queue, onStop: (key: string) => cluster.broadcastStop(key),
    sharedGroupContext: new PgGroupContext({ pool: cluster.pool, limit: config.session.groupContextLimit }),
  } : {}) });
  cluster?.onStopRequest((key) => gateway.lanes.stop(key));
  // Scheduled work (SPEC §17): config jobs are checked here (a bad schedule stops the start, naming the job).
  const jobStore = openJobStore({ stateDir: config.stateDir, pool: cluster?.pool });
  opened.push(() => jobStore.close?.());
  work = scheduledWork({
    config, store: jobStore, clock, logger, sink: () => gateway.sink, canDeliver: (channel, accountId) => Boolean(gateway.adapterFor(channel, accountId)),
    deliveryTargetOf: async (key) => (await sessions.get(key))?.deliveryTarget, ...(options.schedulerTimers ? { timers: options.schedulerTimers } : {}),
  });
  // Cluster mode: Telegram polling and Discord shards are held by one replica at a time (leases), and Discord
  // chats keep a shared watermark for the back-fill after a takeover.
  const channelLeases = cluster ? new PgChannelLeases({ uri: config.store, leaseMs: config.cluster.laneLeaseMs, pollMs: config.cluster.pollMs, logger }) : undefined;
  const watermarks = cluster ? new PgChannelWatermarks(cluster.pool) : undefined;
  opened.push(() => channelLeases?.close());
  const adapters = options.adapters ?? await createChannelAdapters(config, {
    clock, logger, stateDir: config.stateDir,
    delivery: { maxAttempts: config.delivery.maxAttempts, baseDelayMs: config.delivery.retryBaseMs, maxDelayMs: config.delivery.retryMaxMs },
    ...(options.pollBackoff ? { pollBackoff: options.pollBackoff } : {}),
    ...(channelLeases && watermarks ? { cluster: { leases: channelLeases, watermarks } } : {}),
  });
  for (const adapter of adapters) gateway.addAdapter(adapter);

  const ledgerStore = cluster ? new PgLedgerSink({ pool: cluster.pool, logger, replicaId: cluster.replicaId, startedAt }) : undefined;
  const accounting = new Accounting({
    ledgerStore,
    stateDir: config.stateDir, logger, startedAt, ledger: config.ledger, now: () => clock.now(),
    metrics: {
      activeSessions: () => sessions.size,
      evictions: () => sessions.evictionCount,
      queueDepth: () => gateway.lanes.totalQueued(),
      runningTurns: () => gateway.lanes.runningCount,
      messages: () => ({ ...gateway.stats }),
      repliesFailed: () => gateway.deliveryFailures().byChannel,
      jobRuns: () => work.scheduler.runCounts,
      failovers: () => ({ counts: failovers.counts(), coolingDown: failovers.coolingDown() }),
      ...(cluster ? { cluster: () => ({ ...cluster.queue.stats, channelLeaseLosses: channelLeases?.losses ?? 0 }) } : {}),
    },
  });
  await accounting.open();
  opened.push(() => accounting.close());
  runtime.events.subscribe(accounting.observer);
  runtime.events.subscribe(turnLogObserver(logger));
  // Cluster mode: what the pages and clients of this replica see covers every replica (SPEC §13).
  const views: ClusterViews | undefined = cluster ? startClusterViews({ cluster, events: runtime.events, accounting, logger, pollMs: config.cluster.pollMs }) : undefined;
  opened.push(() => views?.close());
  if (views) for (const webchat of adapters.filter(isWebchatChannel)) webchat.forwardOrphans((user, push) => views.webchat.publish(user, push));
  let server: ServerType | undefined;
  // Messages accepted before the last stop are replayed once their channel is connected, so replies can go out.
  const replayLater = new Map<string, typeof pending>();
  for (const p of pending) {
    const key = `${p.message.channel}:${p.message.accountId}`;
    if (!adapters.some((a) => `${a.id}:${a.accountId}` === key)) continue;
    replayLater.set(key, [...(replayLater.get(key) ?? []), p]);
  }
  const replayNow = pending.filter((p) => !replayLater.has(`${p.message.channel}:${p.message.accountId}`));
  const replay = (list: typeof pending) => { if (list.length) logger.info({ count: gateway.replay(list) }, 'replayed messages accepted before the last stop'); };
  const supervisor = new ChannelSupervisor({
    adapters, sink: gateway.sink, logger, clock, ...options.supervision,
    onConnected: async (adapter) => {
      const key = `${adapter.id}:${adapter.accountId}`;
      const waiting = replayLater.get(key);
      replayLater.delete(key);
      if (waiting) replay(waiting);
      await adapter.registerCommands?.(chatCommands(runtime, config))
        .catch((err: unknown) => logger.warn({ err, channel: adapter.id, accountId: adapter.accountId }, 'could not register chat commands'));
    },
  });
  const channelReports = () => adapters.map((a, i) => ({
    id: a.id, accountId: a.accountId, status: a.status, ...(a.statusDetail ? { detail: a.statusDetail } : {}), supervision: supervisor.health()[i],
  }));
  const status = () => buildStatusReport({
    version: VERSION, startedAt, now: () => clock.now(),
    channels: () => [
      ...channelReports(),
      { id: 'api', accountId: 'default', status: server ? 'running' as const : 'disabled' as const },
    ],
    activeSessions: () => sessions.size,
    persistedSessions: () => store.count(),
    providers: Object.values(config.providers).map((p) => ({ id: p.id, kind: p.kind, model: p.model, contextWindow: p.contextWindow })),
    tracker: accounting.providers,
    failovers: () => failovers.report(),
    queue: () => ({ running: gateway.lanes.runningCount, queued: gateway.lanes.totalQueued() }),
    mcp: () => mcp.status(),
    deliveries: () => gateway.deliveryFailures(),
    jobs: () => work.scheduler.list(),
    ...(cluster ? { cluster: async () => ({ replicaId: cluster.replicaId, replicas: await cluster.replicas.live() }) } : {}),
    ...(views ? { providerFigures: () => views.providerFigures(), clusterQueue: () => views.queueTotals() } : {}),
  });
  registerGatewayCommands(runtime.commands, { status, usage: () => accounting.usage() });
  registerCheckedCommands(runtime.commands, { keyTotals: (key) => accounting.keyTotals(key), sessionTotals: (key, id) => accounting.sessionTotals(key, id) });
  const dmWarning = dmScopeWarning(config, await pairing.paired().catch(() => []));
  if (dmWarning) logger.warn(dmWarning);
  for (const line of await runtime.contextEngine.budgetWarnings()) logger.warn(line);
  const dashboardAuth = createDashboardAuth({ token: config.gateway.authToken, stateDir: config.stateDir, clock });
  const ready: ReadinessSources = { pingStore: async () => { await store.get('agent:main:readyz'); }, channels: channelReports, mcp: () => mcp.status(), isClosing: () => gateway.isClosing };
  const live = new DashboardEvents({
    events: runtime.events, status, readiness: () => readiness(ready), activeSessions: () => sessions.activeSessions(),
    pairing: () => pairingAdmin(pairing, config).list(), version: VERSION, startedAt, logger,
    ...(views ? { remote: views.dashboard } : {}),
  });
  opened.push(() => live.close());

  const app = buildHttpApp({
    config, clock, logger, startedAt, adapters, gateway, runtime, scheduler: work.scheduler, store, sessions, transcripts, accounting, mediaStore,
    pairing, rateBuckets, views, status, ready, dashboardAuth, live,
    webchats: adapters.filter(isWebchatChannel), webchatKeyOf: (user) => gateway.sessionKeyOf(webchatMessage(user, '', clock.now())),
    formerKeys: ({ sessionId }) => (cluster ? clusterFormerKeys(cluster.pool, sessionId) : formerKeysOf(transcripts.pathOf(sessionId))),
  });

  let port: number | undefined;
  if (options.listen !== false) {
    const serving = await listen(app.fetch, config.gateway.host, config.gateway.port);
    server = serving.server;
    port = serving.port;
    const listening = server;
    opened.push(() => new Promise((resolve) => listening.close(resolve)));
  }
  const host = config.gateway.host.includes(':') ? `[${config.gateway.host}]` : config.gateway.host;
  const url = port !== undefined ? `http://${host}:${port}` : undefined;
  if (url) lock.update({ url, port });
  await cluster?.replicas.start(url);

  // Channels connect in the background, retried with backoff; start-up never waits for a platform.
  // From here on, an error nobody catches is logged and the gateway keeps serving.
  const releaseProcessGuard = installProcessGuard(logger, config.secrets);
  supervisor.start();
  // MCP servers connect in the background too; their tools join the requests once they are ready.
  setImmediate(() => mcp.start());
  replay(replayNow);
  // Due and missed jobs are submitted once the gateway takes messages; their replies wait for their channel like replays.
  await work.start();
  // Interrupted goal runs are resumed (a cluster queues each once, for whichever replica claims the session); stale ones settled.
  const resumeOptions = {
    resume: config.backgroundExecution.enabled && config.backgroundExecution.autoResumeOnStartup,
    settle: (key: string) => gateway.runOnLane(key, () => runtime.settleStaleRun(key)).then(() => undefined),
  };
  const resumes = cluster && options.listen !== false
    ? new ClusterResumes({
      pool: cluster.pool, store, queue: cluster.queue, gateway, logger, watchMs: Math.min(5000, 5 * config.cluster.pollMs),
      ...resumeOptions,
    })
    : undefined;
  // Cluster mode: claim queued work once this replica's channels had their first try at connecting, so replies can go out.
  // An in-process `switchboard chat` joins no work: it has no platform channel to answer through.
  if (cluster && resumes) {
    void withDeadline(supervisor.firstAttempts(), 15_000)
      .then(() => { if (!gateway.isClosing) { cluster.queue.start(resumes.guard((job) => gateway.runJob(job)), gateway.queueModePolicy()); resumes.start(); } });
    cluster.onReplicaLeft((id) => resumes.replicaLeft(id));
  }
  if (!cluster) void resumeInterruptedRuns(gateway, allSessions(store, sessions), logger, resumeOptions);

  const stopHousekeeping = startHousekeeping({ config, clock, logger, transcripts, media: mediaStore, ...(ledgerStore ? { ledger: ledgerStore } : {}) });
  // The tokenizer tables take ~0.4 s each to load: load them just after start-up rather than in the first turn.
  setTimeout(() => preloadTokenizers(config.agents.map((a) => a.model)), 250).unref();

  const providerInfo = config.providers[config.agents[0]?.providerId ?? 'default'];
  logger.info({ url, stateDir: config.stateDir, provider: providerInfo?.kind, model: config.agents[0]?.model }, 'Switchboard is running');

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      logger.info('shutting down: no new messages; finishing running turns');
      work.stop();
      resumes?.close();
      cluster?.queue.close();
      await gateway.close(config.gateway.shutdownGraceMs);
      await supervisor.stop();
      await channelLeases?.close();
      await watermarks?.flush().catch(() => undefined);
      await mcp.stop();
      live.close();
      await views?.close();
      if (server) await closeGracefully(server);
      stopHousekeeping();
      await accounting.close();
      await sessions.flush();
      await transcripts.close();
      await mediaStore.close?.();
      await jobStore.close?.();
      await closePdfWorkers();
      await inbox?.close();
      await pairing.close().catch(() => undefined);
      await store.close();
      await cluster?.close();
      await lock.release();
      releaseProcessGuard();
      logger.info('stopped');
    })();
    return stopping;
  };

  return { config, url, port, gateway, runtime, sessions, store, transcripts, adapters, logger, startedAt, accounting, supervisor, app, status, stop };
}
