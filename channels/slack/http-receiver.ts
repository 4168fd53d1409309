import type { App, Receiver, ReceiverEvent } from '@slack/bolt';
import type { Clock } from '../../src/core/clock.ts';
import type { Logger } from '../../src/core/logger.ts';
import { verifySlackSignature } from './signature.ts';
import { withDeadline } from '../../src/core/deadline.ts';

/**
 * Set by the event listener when the gateway could not take the event: `shutting-down` is answered 503,
 * `failed` (the journal could not take it) 500; Slack retries both. Anything else is answered 200.
 */
export interface DeliveryOutcome {
  rejected: false | 'shutting-down' | 'failed';
}

/** The name under which each request's {@link DeliveryOutcome} reaches the listener's `context`. */
export const DELIVERY_PROPERTY = 'switchboardDelivery';

/** Timer functions, injected so tests decide when the answer deadline passes. */
export interface ReceiverTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: ReceiverTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Options of {@link SlackHttpReceiver}. */
export interface SlackHttpReceiverOptions {
  signingSecret: string;
  clock: Clock;
  logger: Logger;
  /**
   * The longest an event request waits for the gateway to take (commit) the event (default 2.5 s; Slack
   * gives up after 3 s). Not taken by then: 503, and Slack retries (the event id dedupes a late commit).
   */
  ackDeadlineMs?: number;
  timers?: ReceiverTimers;
}

/**
 * A bolt receiver for the Events API on the gateway's own HTTP server (`POST /webhooks/slack/<account>`),
 * with web `Request`/`Response`. It checks the v0 signature and the timestamp (401 and nothing processed
 * otherwise), answers `url_verification`, and answers an event once the gateway has journaled it, which
 * takes milliseconds (a commit to PostgreSQL in cluster mode); the turn runs after the answer. An event not
 * taken within `ackDeadlineMs` is answered 503, never 200 (SPEC §13: acknowledged only once committed), so
 * Slack retries it; a retry (`X-Slack-Retry-Num`) is processed like any request, and the event id dedupes.
 */
export class SlackHttpReceiver implements Receiver {
  private app?: App;
  private running = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly options: SlackHttpReceiverOptions;

  constructor(options: SlackHttpReceiverOptions) {
    this.options = options;
  }

  init(app: App): void {
    this.app = app;
  }

  async start(): Promise<void> {
    this.running = true;
  }

  /** Stops taking events and waits (briefly) for the ones being handed over. */
  async stop(): Promise<void> {
    this.running = false;
    await withDeadline(Promise.allSettled([...this.inFlight]), 2000);
  }

  /** Handles one POST from Slack. */
  async handle(request: Request, correlationId: string): Promise<Response> {
    const rawBody = await request.text();
    const check = verifySlackSignature({
      signingSecret: this.options.signingSecret,
      rawBody,
      timestamp: request.headers.get('x-slack-request-timestamp'),
      signature: request.headers.get('x-slack-signature'),
      nowMs: this.options.clock.now(),
    });
    if (!check.ok) {
      this.options.logger.warn({ correlationId, reason: check.reason }, 'slack: refused a request that is not signed by Slack');
      return jsonError(401, `Slack request verification failed (${check.reason}).`, 'unauthorized');
    }
    let body: Record<string, unknown>;
    try {
      body = parseBody(rawBody, request.headers.get('content-type') ?? '');
    } catch (error) {
      // Signed by Slack's secret but not a payload: 400 and a log line, never a 5xx that invites retries.
      const reason = (error as Error).message;
      this.options.logger.warn({ correlationId, reason }, 'slack: refused a signed request whose body is not a Slack payload (400)');
      return jsonError(400, `The Slack request body is not a Slack payload: ${reason}.`, 'bad_request');
    }
    if (body.type === 'url_verification') return Response.json({ challenge: body.challenge });
    if (body.ssl_check) return new Response(null, { status: 200 });
    const app = this.app;
    if (!this.running || !app) return jsonError(503, 'The Slack channel is not running; Slack will retry.', 'unavailable');

    const outcome: DeliveryOutcome = { rejected: false };
    let ackBody: unknown;
    const retry = request.headers.get('x-slack-retry-num');
    const event: ReceiverEvent = {
      body,
      ack: async (response?: unknown) => { ackBody = response; },
      ...(retry ? { retryNum: Number(retry), retryReason: request.headers.get('x-slack-retry-reason') ?? undefined } : {}),
      customProperties: { [DELIVERY_PROPERTY]: outcome },
    };
    const processing = app.processEvent(event).catch((err: unknown) => {
      this.options.logger.error({ err, correlationId }, 'slack: an event could not be processed');
    });
    this.inFlight.add(processing);
    void processing.finally(() => this.inFlight.delete(processing));
    const timers = this.options.timers ?? realTimers;
    const deadlineMs = this.options.ackDeadlineMs ?? 2500;
    const inTime = (await withDeadline(processing.then(() => true), deadlineMs, timers)) === true;
    if (!inTime) {
      this.options.logger.warn({ correlationId, deadlineMs, eventId: body.event_id }, 'slack: event not taken in time; answered 503 so that Slack retries');
      return jsonError(503, 'The event could not be taken in time; Slack will retry.', 'unavailable');
    }
    if (outcome.rejected === 'shutting-down') return jsonError(503, 'Switchboard is shutting down; Slack will retry.', 'unavailable');
    if (outcome.rejected === 'failed') return jsonError(500, 'The event could not be taken; Slack will retry.', 'internal_error');
    return ackBody === undefined || ackBody === '' ? new Response(null, { status: 200 }) : Response.json(ackBody);
  }
}

/** The payload of a request: a JSON object, or form data whose `payload` (interactivity) is one. Throws why not. */
function parseBody(raw: string, contentType: string): Record<string, unknown> {
  let value: unknown;
  if (contentType.includes('application/x-www-form-urlencoded')) {
    const form = Object.fromEntries(new URLSearchParams(raw));
    if (typeof form.payload !== 'string') return form;
    value = parseJson(form.payload, 'the form payload');
  } else value = parseJson(raw, 'the body');
  if (!isRecord(value)) return fail(`it is ${describe(value)}, not an object`);
  if (value.type !== undefined && typeof value.type !== 'string') return fail('its type is not a string');
  if (value.type === 'event_callback' && (!isRecord(value.event) || typeof value.event.type !== 'string')) return fail('an event_callback without an event');
  return value;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const describe = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v);
const fail = (reason: string): never => { throw new Error(reason); };

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return fail(`${what} is not JSON`);
  }
}

function jsonError(status: number, message: string, type: string): Response {
  return Response.json({ error: { message, type, code: type } }, { status });
}
