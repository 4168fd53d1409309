import { SocketModeReceiver, type App, type Logger as BoltLogger, type ReceiverEvent, webApi } from '@slack/bolt';
import type { Logger } from '../../src/core/logger.ts';
import { withDeadline } from '../../src/core/deadline.ts';
import { describeSlackError, isSlackAuthError } from './auth.ts';
import { DELIVERY_PROPERTY, type DeliveryOutcome } from './http-receiver.ts';

/** What {@link SlackSocket} tells its adapter about the connection after start. */
export interface SlackSocketEvents {
  /** The connection is down and being re-established; `reason` is one line (why it dropped, or why the last attempt failed). */
  disconnected(reason: string): void;
  /** Connected again. */
  reconnected(): void;
  /** Slack refused the app token on a reconnect (invalid_auth, token_revoked, …): no more attempts. */
  authFailed(error: unknown): void;
}

/** Options of {@link SlackSocket}. */
export interface SlackSocketOptions {
  appToken: string;
  clientOptions: webApi.WebClientOptions;
  boltLogger: BoltLogger;
  logger: Logger;
  /** Longest wait for the close handshake on stop (default 2 s). */
  closeTimeoutMs?: number;
  /** Hears of outages after start, and of their end. */
  events?: SlackSocketEvents;
}

/** What @slack/socket-mode emits as `slack_event`. */
interface SlackEventArgs {
  ack(response?: unknown): Promise<void>;
  envelope_id?: string;
  type?: string;
  body?: Record<string, unknown>;
  retry_num?: number;
  retry_reason?: string;
}

/**
 * Socket Mode through bolt's SocketModeReceiver, with three changes: an envelope is acknowledged only after
 * the gateway took its event (bolt acks events before its listeners run; SPEC §13 wants the ack after the
 * commit), and not at all when the gateway could not take it, so Slack sends it again (to any connection,
 * any replica); reconnection is ours (bolt's own loop turns an unreachable API during a reconnect into an
 * unhandled rejection), from 0.5 s backing off to 30 s; and stop waits for the close handshake, then cleans
 * up (so no 30 s handshake timer is left behind).
 */
export class SlackSocket {
  readonly receiver: SocketModeReceiver;
  private readonly options: SlackSocketOptions;
  private stopping = false;
  private connected = false;
  private failures = 0;
  private reconnectTimer?: NodeJS.Timeout;
  /** While starting or stopping, the Socket Mode client's own complaints go to debug: the outcome is logged once by us. */
  private quiet = false;
  private app?: App;

  constructor(options: SlackSocketOptions) {
    this.options = options;
    const bolt = options.boltLogger;
    const logger: BoltLogger = {
      ...bolt,
      warn: (...args: unknown[]) => (this.quiet ? bolt.debug(...args) : bolt.warn(...args)),
      // A dropped socket is reported once by us ("connection lost"); the client's error lines about it are detail.
      error: (...args: unknown[]) => (this.quiet || isSocketDropNoise(args) ? bolt.debug(...args) : bolt.error(...args)),
    };
    this.receiver = new SocketModeReceiver({
      appToken: options.appToken,
      logger,
      autoReconnectEnabled: false,
      installerOptions: { clientOptions: { ...options.clientOptions } },
    });
    this.receiver.client.on('disconnected', () => this.onDisconnected());
    const init = this.receiver.init.bind(this.receiver);
    this.receiver.init = (app: App) => {
      this.app = app;
      init(app);
    };
    // Bolt's own listener acks before processing: ours hands the event over first.
    this.receiver.client.removeAllListeners('slack_event');
    this.receiver.client.on('slack_event', (args: SlackEventArgs) => { void this.onEvent(args); });
    guardFrames(this.receiver.client as unknown as FrameClient, options.logger);
  }

  /** Opens the connection; resolves on Slack's `hello`. */
  async start(): Promise<void> {
    this.stopping = false;
    this.quiet = true;
    try {
      await this.receiver.client.start();
    } finally {
      this.quiet = false;
    }
    this.connected = true;
    this.failures = 0;
  }

  /** Closes the connection gracefully (bounded). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.quiet = true;
    clearTimeout(this.reconnectTimer);
    const client = this.receiver.client;
    const closed = (await withDeadline(client.disconnect().then(() => true), this.options.closeTimeoutMs ?? 2000)) === true;
    // The peer never answered the close frame: a second disconnect() on a CLOSING socket cleans up at once.
    if (!closed) client.websocket?.disconnect();
    this.connected = false;
  }

  /** Processes one envelope through bolt, then acks it, unless the gateway did not take its event. */
  private async onEvent(args: SlackEventArgs): Promise<void> {
    const app = this.app;
    if (!app || !args.body) return;
    const outcome: DeliveryOutcome = { rejected: false };
    let response: unknown;
    const event: ReceiverEvent = {
      body: args.body,
      ack: async (r?: unknown) => { response = r; },
      ...(args.retry_num !== undefined ? { retryNum: args.retry_num } : {}),
      ...(args.retry_reason ? { retryReason: args.retry_reason } : {}),
      customProperties: { [DELIVERY_PROPERTY]: outcome },
    };
    const envelopeId = args.envelope_id;
    try {
      await app.processEvent(event);
    } catch (err) {
      this.options.logger.error({ err, envelopeId }, 'slack: an envelope could not be processed; not acknowledged, Slack sends it again');
      return;
    }
    if (outcome.rejected) {
      this.options.logger.info({ envelopeId, reason: outcome.rejected }, 'slack: envelope not acknowledged (its event was not taken); Slack sends it again');
      return;
    }
    await args.ack(response).catch((err: unknown) => this.options.logger.warn({ err, envelopeId }, 'slack: could not acknowledge an envelope; Slack sends it again'));
  }

  private onDisconnected(): void {
    if (this.stopping || !this.connected) return;
    this.connected = false;
    // Once per outage; the attempts that follow are debug, their end is one info line.
    this.options.logger.warn('slack: Socket Mode connection lost; reconnecting');
    this.options.events?.disconnected('Socket Mode connection lost');
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    const delay = Math.min(30_000, 500 * 2 ** this.failures);
    this.options.logger.debug({ retryInMs: delay, failures: this.failures }, 'slack: Socket Mode reconnect scheduled');
    this.reconnectTimer = setTimeout(() => {
      if (this.stopping) return;
      // The client's own complaints about a failed attempt would repeat on every attempt: the outcome is ours.
      this.quiet = true;
      this.receiver.client.start().then(
        () => {
          this.quiet = false;
          if (this.stopping) return;
          this.connected = true;
          this.failures = 0;
          this.options.logger.info('slack: Socket Mode reconnected');
          this.options.events?.reconnected();
        },
        (err: unknown) => {
          this.quiet = false;
          if (this.stopping) return;
          this.failures++;
          if (isSlackAuthError(err)) {
            // A refused app token does not come back by retrying: the adapter fails, the supervisor says so once.
            this.options.logger.debug({ err }, 'slack: Socket Mode reconnect refused the app token; not retrying');
            this.options.events?.authFailed(err);
            return;
          }
          this.options.logger.debug({ err, failures: this.failures }, 'slack: Socket Mode reconnect failed');
          this.options.events?.disconnected(`Socket Mode reconnect failed: ${describeSlackError(err)}`);
          this.scheduleReconnect();
        },
      );
    }, delay);
    this.reconnectTimer.unref();
  }
}

/** The Socket Mode client's own error lines when its WebSocket drops ("WebSocket error occurred", "WebSocket error! …"). */
function isSocketDropNoise(args: unknown[]): boolean {
  return typeof args[0] === 'string' && args[0].startsWith('WebSocket error');
}

type FrameClient = {
  listenerCount(event: string): number;
  removeAllListeners(event: string): unknown;
  on(event: string, listener: (data: unknown, isBinary: boolean) => void): unknown;
  onWebSocketMessage?: (data: unknown, isBinary: boolean) => Promise<void>;
  send?: (envelopeId: string, body?: unknown) => Promise<void>;
};

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Names the Socket Mode client emits for its own state and plumbing. It emits every envelope under its
 * type (an events_api one under its event's type) on the same emitter: an envelope typed `connected` or
 * `disconnected` would drive the client's connection logic (a reconnect while the old socket is open,
 * duplicate connections), and one typed `error` throws when nobody listens for it.
 */
const RESERVED_NAMES = new Set([
  'connecting', 'connected', 'reconnecting', 'disconnecting', 'disconnected', 'authenticated',
  'slack_event', 'ws_message', 'outgoing_message', 'error', 'close', 'open', 'newListener', 'removeListener',
]);

/** Why a Socket Mode frame cannot be handed to the client, and its envelope id to acknowledge it by. */
export function frameProblem(data: unknown, isBinary: boolean): { reason: string; envelopeId?: string } | undefined {
  if (isBinary) return undefined; // the client ignores binary frames itself
  let frame: unknown;
  try {
    frame = JSON.parse(typeof data === 'string' ? data : new TextDecoder().decode(data as ArrayBuffer));
  } catch {
    return undefined; // the client ignores what is not JSON itself
  }
  if (!isRecord(frame)) return { reason: 'the frame is not an object' };
  if (typeof frame.type !== 'string') return { reason: 'the frame has no type' };
  const envelopeId = typeof frame.envelope_id === 'string' ? frame.envelope_id : undefined;
  if (RESERVED_NAMES.has(frame.type)) return { reason: `the envelope type "${frame.type}" is a name the client uses itself`, ...(envelopeId ? { envelopeId } : {}) };
  if (frame.type === 'events_api') {
    const payload = frame.payload;
    if (!isRecord(payload) || !isRecord(payload.event) || typeof payload.event.type !== 'string') {
      return { reason: 'an events_api envelope without an event', ...(envelopeId ? { envelopeId } : {}) };
    }
    if (RESERVED_NAMES.has(payload.event.type)) {
      return { reason: `the event type "${payload.event.type}" is a name the client uses itself`, ...(envelopeId ? { envelopeId } : {}) };
    }
  }
  return undefined;
}

/**
 * @slack/socket-mode 2.x reads `payload.event.type` of every events_api envelope without checking it, in an
 * async handler whose rejection nobody catches: one malformed envelope is an unhandled rejection (a crash
 * under Node's default). Frames are checked first: a malformed envelope is acknowledged (a retry would be
 * as malformed) and dropped with a log line; anything the client still throws on is logged.
 */
function guardFrames(client: FrameClient, logger: Logger): void {
  const handle = client.onWebSocketMessage;
  if (typeof handle !== 'function' || client.listenerCount('ws_message') !== 1) {
    logger.warn('slack: this @slack/socket-mode version cannot be guarded against malformed frames; the process guard remains');
    return;
  }
  client.removeAllListeners('ws_message');
  client.on('ws_message', (data, isBinary) => {
    const problem = frameProblem(data, isBinary);
    if (problem) {
      logger.warn({ reason: problem.reason, envelopeId: problem.envelopeId }, 'slack: dropped a malformed Socket Mode frame');
      if (problem.envelopeId) void client.send?.(problem.envelopeId).catch(() => undefined);
      return;
    }
    handle.call(client, data, isBinary).catch((err: unknown) => logger.error({ err }, 'slack: a Socket Mode frame could not be handled; the channel goes on'));
  });
}
