import type { Context } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import type { StatusReport } from '../accounting/status-report.ts';
import type { TurnEvents, TurnScope } from '../agent/turn-events.ts';
import type { Logger } from '../core/logger.ts';
import type { PairedPeer, PairingRequest } from '../routing/pairing.ts';
import { totalTokens, type SessionEntry } from '../sessions/entry.ts';
import type { HttpApp } from './app.ts';
import type { ReadinessReport } from './ready-route.ts';

/** What the dashboard's event stream reads. */
export interface DashboardEventSources {
  /** The runtime's turn events: a turn's start, each LLM call, tool call and batch end, and its end. */
  events: TurnEvents;
  /** `GET /status` (channels as `/readyz` sees them, queue, sessions, providers, MCP servers). */
  status(): Promise<StatusReport>;
  /** `GET /readyz`'s own check ({@link readiness}), sent with each status as `readiness`, so the page says what `/readyz` says. */
  readiness?(): Promise<ReadinessReport>;
  /** Sessions in memory, to notice changes made outside a turn (admin reset, `/stop`, eviction). */
  activeSessions(): Iterable<{ entry: SessionEntry }>;
  /** Pending pairing requests and paired peers. */
  pairing(): Promise<{ pending: PairingRequest[]; paired: PairedPeer[] }>;
  version: string;
  startedAt: number;
  logger: Logger;
  /** How often status, pairing and sessions are compared while a page listens (default 1000 ms). */
  tickMs?: number;
  /** Comment lines that keep idle connections open through proxies (default every 15 s). */
  heartbeatMs?: number;
  /**
   * Cluster mode: the other replicas' session changes (their turns), and where to say that a page opened or
   * closed here (they publish only while some replica has one open).
   */
  remote?: { subscribe(onSession: (key: string, reason: string) => void): () => void; watch(open: boolean): void };
}

/** The `status` event: the `/status` report and, when the gateway gives it, the readiness report. */
export type DashboardStatus = StatusReport & { readiness?: ReadinessReport };

/** One connected page. */
interface Listener {
  stream: SSEStreamingApi;
  /** The nonce of the session cookie it was opened with (none with the bearer header or without a token). */
  session: string | undefined;
  close(): void;
}

/**
 * `GET /dashboard/events`: one Server-Sent Events stream per open dashboard. Events:
 * - `hello` `{version, startedAt}` first (`retry: 1000`, so the browser reconnects within a second after a restart);
 * - `session` `{key, reason}` when a turn starts or ends, an LLM call is counted, a tool runs, a batch ends, or an
 *   entry in memory changed otherwise (`reason: "changed"`); in cluster mode also for the turns of the other
 *   replicas (`remote`, gathered there for up to a fraction of a second);
 * - `status` (the `/status` report plus `readiness`: `{ ready, failing }` as `GET /readyz` judges it) and `pairing` (`{pending, paired}`) on connect and whenever they change.
 * - `signed-out` `{}` just before the stream ends because the cookie it was opened with was signed out.
 *
 * Turn events are pushed at once; status, pairing and entries have no change events of their own, so they
 * are compared every `tickMs`, and only while at least one page listens.
 */
export class DashboardEvents {
  private readonly sources: DashboardEventSources;
  private readonly listeners = new Set<Listener>();
  private readonly unsubscribe: () => void;
  private readonly unsubscribeRemote: () => void;
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  /** Set while the checks fail, so a failing store is logged once, not every tick. */
  private failing = false;
  private ticks = 0;
  /** What was last pushed (as compared text and as sent), so a new page starts from what the others have. */
  private last: { status?: string; pairing?: string; entries?: Map<string, string>; sent?: { status: DashboardStatus; pairing?: unknown } } = {};

  constructor(sources: DashboardEventSources) {
    this.sources = sources;
    const turn = (reason: string) => (event: TurnScope) => this.broadcast('session', { key: event.sessionKey, reason });
    this.unsubscribe = sources.events.subscribe({
      onTurnStart: turn('turn-start'),
      onLlmCall: turn('llm-call'),
      onToolCall: turn('tool-call'),
      onBatchEnd: turn('batch-end'),
      onTurnEnd: turn('turn-end'),
    });
    this.unsubscribeRemote = sources.remote?.subscribe((key, reason) => this.broadcast('session', { key, reason })) ?? (() => undefined);
  }

  /** Pages listening now. */
  get listenerCount(): number {
    return this.listeners.size;
  }

  /** Mounts `GET /dashboard/events`; `sessionOf` names the sign-in a request's cookie belongs to. */
  mount(app: HttpApp, sessionOf: (c: Context) => string | undefined = () => undefined): void {
    app.get('/dashboard/events', (c) => {
      c.header('x-accel-buffering', 'no');
      const session = sessionOf(c);
      return streamSSE(c, async (stream) => {
        await new Promise<void>((resolve) => {
          const listener: Listener = { stream, session, close: resolve };
          stream.onAbort(resolve);
          this.listeners.add(listener);
          this.sources.remote?.watch(true);
          void this.greet(listener);
          this.timer ??= setInterval(() => void this.tick(), this.sources.tickMs ?? 1000);
        }).finally(() => {
          this.sources.remote?.watch(false);
          for (const l of this.listeners) if (l.stream === stream) this.listeners.delete(l);
          if (this.listeners.size === 0) this.stopTimer();
        });
      });
    });
  }

  /** Ends the streams opened with the session cookie `nonce` (it was signed out). */
  endSession(nonce: string): void {
    for (const l of this.listeners) {
      if (l.session !== nonce) continue;
      this.listeners.delete(l);
      // Said first, so the page goes to sign-in instead of reconnecting into a 401.
      l.stream.writeSSE({ event: 'signed-out', data: '{}' }).catch(() => undefined).finally(() => l.close());
    }
    if (this.listeners.size === 0) this.stopTimer();
  }

  /** Ends every stream (at shutdown) and stops listening to turn events. */
  close(): void {
    this.unsubscribe();
    this.unsubscribeRemote();
    this.stopTimer();
    for (const l of this.listeners) l.close();
    this.listeners.clear();
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.last = {};
  }

  private send(listener: Listener, event: string, data: unknown, retry?: number): void {
    listener.stream.writeSSE({ event, data: JSON.stringify(data), ...(retry ? { retry } : {}) }).catch(() => listener.close());
  }

  private broadcast(event: string, data: unknown): void {
    for (const l of this.listeners) this.send(l, event, data);
  }

  /** Hello, then the status and pairing the other pages have (or, for the first page, a check right away). */
  private async greet(listener: Listener): Promise<void> {
    this.send(listener, 'hello', { version: this.sources.version, startedAt: this.sources.startedAt }, 1000);
    if (!this.last.sent) return this.tick();
    this.send(listener, 'status', this.last.sent.status);
    if (this.last.sent.pairing) this.send(listener, 'pairing', this.last.sent.pairing);
  }

  /** Compares status, pairing and entries in memory with the last tick, and pushes what changed. */
  private async tick(): Promise<void> {
    if (this.ticking || this.listeners.size === 0) return;
    this.ticking = true;
    try {
      const [report, ready] = await Promise.all([this.sources.status(), this.sources.readiness?.()]);
      const status: DashboardStatus = ready ? { ...report, readiness: ready } : report;
      // uptime changes every second; it is not a change worth a push.
      const statusText = JSON.stringify({ ...status, uptimeSeconds: 0 });
      if (statusText !== this.last.status) this.broadcast('status', status);
      this.last.status = statusText;
      this.last.sent = { ...this.last.sent, status };
      // After the status: a store that is down fails this, and the page must still hear that it is not ready.
      const pairing = await this.sources.pairing();
      const pairingText = JSON.stringify(pairing);
      if (pairingText !== this.last.pairing) this.broadcast('pairing', pairing);
      this.last.pairing = pairingText;
      this.last.sent = { status, pairing };
      const entries = new Map<string, string>();
      for (const { entry: e } of this.sources.activeSessions()) {
        entries.set(e.key, `${e.sessionId}|${e.updatedAt}|${e.runState}|${e.messageCount}|${totalTokens(e.tokens)}|${e.compactionCount}|${e.goal ?? ''}`);
      }
      if (this.last.entries) {
        for (const [key, print] of entries) if (this.last.entries.get(key) !== print) this.broadcast('session', { key, reason: 'changed' });
      }
      this.last.entries = entries;
      if (++this.ticks % Math.max(1, Math.round((this.sources.heartbeatMs ?? 15_000) / (this.sources.tickMs ?? 1000))) === 0) {
        for (const l of this.listeners) l.stream.write(': keep-alive\n\n').catch(() => l.close());
      }
      this.failing = false;
    } catch (error) {
      if (!this.failing) this.sources.logger.warn({ err: error }, 'dashboard: status check failed (logged once until it works again)');
      this.failing = true;
    } finally {
      this.ticking = false;
    }
  }
}
