import type { ChannelAdapter, InboundSink } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import type { Logger } from '../core/logger.ts';
import { withDeadline } from '../core/deadline.ts';

/** Timer functions, injected so tests decide when a retry fires. */
export interface SupervisorTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: SupervisorTimers = {
  setTimeout: (fn, ms) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * What the supervisor knows about one channel account. `connecting`: an attempt runs; `connected`: the
 * adapter runs; `retrying`: the last attempt failed and the next one is scheduled; `gave-up`: a definite
 * auth or configuration failure, not retried; `stopped`: the gateway stops.
 */
export interface ChannelHealth {
  id: string;
  accountId: string;
  state: 'connecting' | 'connected' | 'retrying' | 'gave-up' | 'stopped';
  /** Start attempts so far. */
  attempts: number;
  /** The last failure, one line. */
  lastError?: string;
  lastErrorCode?: string;
  /** ISO time of the next attempt while retrying. */
  nextRetryAt?: string;
  /** ISO time the channel last connected. */
  connectedAt?: string;
}

/** Backoff between attempts: `baseMs · 2^(failures−1)`, at most `maxMs`, with ±`jitter` of it at random. */
export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
  /** 0..1; 0.2 spreads each delay over ±20 %. */
  jitter: number;
}

/** Options of {@link ChannelSupervisor}. */
export interface ChannelSupervisorOptions {
  adapters: readonly ChannelAdapter[];
  sink: InboundSink;
  logger: Logger;
  clock: Clock;
  timers?: SupervisorTimers;
  /** Default: 1 s doubling up to 5 min, ±20 %. */
  backoff?: Partial<BackoffPolicy>;
  random?: () => number;
  /** How often connected channels are checked for a later failure (default 5 s). */
  watchMs?: number;
  /** Runs after each successful connection (chat command registration). Failures are the callee's. */
  onConnected?(adapter: ChannelAdapter): Promise<void>;
}

/** Error codes of failures that retrying cannot fix: a refused or missing token, a configuration mistake. */
const DEFINITE = /(_TOKEN_REJECTED|_TOKEN_MISSING|_AUTH_FAILED|_AUTH|_CONFIG|_INTENTS_DISALLOWED|_WEBHOOK_SECRET)$/;

/** True for a definite auth or configuration failure (401/403, invalid or missing token): not retried. */
export function isDefiniteFailure(error: unknown): boolean {
  const e = error as { code?: unknown; status?: unknown; providerStatus?: unknown } | undefined;
  if (typeof e?.code === 'string' && DEFINITE.test(e.code)) return true;
  return e?.providerStatus === 401 || e?.providerStatus === 403;
}

interface Entry {
  adapter: ChannelAdapter;
  health: ChannelHealth;
  /** Consecutive failures, for the backoff. */
  failures: number;
  timer?: unknown;
  attempt?: Promise<void>;
  /** The first attempt's outcome. */
  first: Promise<void>;
  settleFirst?: () => void;
}

/**
 * Starts every channel without holding up the gateway, and keeps it up: a channel that fails at start or
 * later (network down, API unreachable, 5xx) is retried with capped exponential backoff and jitter, for
 * as long as the gateway runs; only a definite auth or configuration failure stops the retries, with one
 * clear line. The state and last error of each channel are in {@link health} (`GET /status`, `/readyz`).
 */
export class ChannelSupervisor {
  private readonly options: ChannelSupervisorOptions;
  private readonly entries: Entry[];
  private readonly timers: SupervisorTimers;
  private readonly backoff: BackoffPolicy;
  private watchTimer?: unknown;
  private stopping = false;

  constructor(options: ChannelSupervisorOptions) {
    this.options = options;
    this.timers = options.timers ?? realTimers;
    this.backoff = { baseMs: 1000, maxMs: 300_000, jitter: 0.2, ...options.backoff };
    this.entries = options.adapters.map((adapter) => {
      const entry: Entry = {
        adapter, failures: 0, first: Promise.resolve(),
        health: { id: adapter.id, accountId: adapter.accountId, state: 'connecting', attempts: 0 },
      };
      entry.first = new Promise<void>((resolve) => { entry.settleFirst = resolve; });
      return entry;
    });
  }

  /** Starts the first attempt of every channel and returns at once. */
  start(): void {
    for (const entry of this.entries) this.launch(entry);
    this.watch();
  }

  /** Settles once every channel's first attempt has succeeded or failed (tests, `switchboard chat`). */
  async firstAttempts(): Promise<void> {
    await Promise.all(this.entries.map((e) => e.first));
  }

  /**
   * Each channel's state, attempts and last error. A connected channel whose adapter reports an outage (its
   * SDK reconnects on its own) shows the adapter's current reason as its last error, not an older one.
   */
  health(): ChannelHealth[] {
    return this.entries.map((e) => {
      const { status, statusDetail } = e.adapter;
      const outage = e.health.state === 'connected' && status !== 'running' && status !== 'standby' && statusDetail;
      return outage ? { ...e.health, lastError: statusDetail } : { ...e.health };
    });
  }

  /** Stops retrying and stops every adapter (an attempt under way is waited for at most `boundMs`). */
  async stop(boundMs = 2000): Promise<void> {
    this.stopping = true;
    if (this.watchTimer !== undefined) this.timers.clearTimeout(this.watchTimer);
    for (const entry of this.entries) {
      if (entry.timer !== undefined) this.timers.clearTimeout(entry.timer);
      entry.timer = undefined;
      entry.health = { ...entry.health, state: 'stopped', nextRetryAt: undefined };
    }
    const pending = this.entries.flatMap((e) => (e.attempt ? [e.attempt] : []));
    if (pending.length) {
      await withDeadline(Promise.allSettled(pending), boundMs);
    }
    await Promise.allSettled(this.entries.map((e) => e.adapter.stop()));
  }

  private launch(entry: Entry): void {
    entry.timer = undefined;
    if (this.stopping || entry.attempt) return;
    entry.attempt = this.attempt(entry).finally(() => {
      entry.attempt = undefined;
      entry.settleFirst?.();
      entry.settleFirst = undefined;
    });
  }

  private async attempt(entry: Entry): Promise<void> {
    const { adapter } = entry;
    const name = `${adapter.id}/${adapter.accountId}`;
    const logger = this.options.logger;
    entry.health = { ...entry.health, state: 'connecting', attempts: entry.health.attempts + 1, nextRetryAt: undefined };
    try {
      await adapter.start(this.options.sink);
    } catch (error) {
      if (this.stopping) return;
      this.failed(entry, error, 'did not start');
      return;
    }
    if (this.stopping) {
      // The gateway began stopping while this attempt ran: the adapter started after everything was stopped.
      await adapter.stop().catch(() => undefined);
      return;
    }
    const retried = entry.health.attempts > 1;
    entry.failures = 0;
    entry.health = { ...entry.health, state: 'connected', connectedAt: new Date(this.options.clock.now()).toISOString() };
    logger.info({ channel: adapter.id, accountId: adapter.accountId, attempts: entry.health.attempts }, retried ? `channel ${name} connected after ${entry.health.attempts} attempts` : 'channel started');
    await this.options.onConnected?.(adapter).catch(() => undefined);
  }

  private failed(entry: Entry, error: unknown, what: 'did not start' | 'stopped'): void {
    const { adapter } = entry;
    const name = `${adapter.id}/${adapter.accountId}`;
    const message = oneLine(error);
    const code = (error as { code?: unknown }).code;
    const repeated = entry.health.lastError === message;
    entry.failures++;
    entry.health = { ...entry.health, lastError: message, ...(typeof code === 'string' ? { lastErrorCode: code } : {}) };
    const fields = { channel: adapter.id, accountId: adapter.accountId, code, attempts: entry.health.attempts };
    if (isDefiniteFailure(error)) {
      entry.health = { ...entry.health, state: 'gave-up' };
      // One clear line; retrying cannot fix a refused token or a configuration mistake.
      this.options.logger.error(fields, `channel ${name} ${what}: ${message}`);
      return;
    }
    const delay = this.delay(entry.failures);
    entry.health = { ...entry.health, state: 'retrying', nextRetryAt: new Date(this.options.clock.now() + delay).toISOString() };
    // The first failure and every new reason are warnings; the same failure again is only debug.
    const level = repeated ? 'debug' : 'warn';
    this.options.logger[level]({ ...fields, retryInMs: delay }, `channel ${name} ${what}: ${message} (retrying in ${formatDelay(delay)})`);
    entry.timer = this.timers.setTimeout(() => this.launch(entry), delay);
  }

  private delay(failures: number): number {
    const { baseMs, maxMs, jitter } = this.backoff;
    const raw = Math.min(maxMs, baseMs * 2 ** Math.min(failures - 1, 30));
    const spread = raw * jitter * (2 * (this.options.random ?? Math.random)() - 1);
    return Math.max(0, Math.round(Math.min(maxMs, raw + spread)));
  }

  /** Connected channels whose adapter reports a failure later on (polling stopped, gateway closed) are restarted. */
  private watch(): void {
    if (this.stopping) return;
    this.watchTimer = this.timers.setTimeout(() => {
      void this.check().finally(() => this.watch());
    }, this.options.watchMs ?? 5000);
  }

  /** One pass of the watch: restarts channels that failed after connecting. Exposed for tests through the timers. */
  private async check(): Promise<void> {
    for (const entry of this.entries) {
      if (this.stopping || entry.health.state !== 'connected' || entry.adapter.status !== 'failed') continue;
      const detail = entry.adapter.statusDetail ?? 'the channel reported a failure';
      // The adapter's own error keeps its code: a token revoked while running gives up instead of retrying forever.
      const failure = entry.adapter.lastFailure;
      await entry.adapter.stop().catch(() => undefined);
      this.failed(entry, failure instanceof Error ? failure : new Error(detail), 'stopped');
    }
  }
}

function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0]!.trim() || 'unknown error';
}

function formatDelay(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 100) / 10} s`;
  return `${Math.round(ms / 60_000)} min`;
}
