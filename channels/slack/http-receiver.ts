import type { App, Receiver, ReceiverEvent } from '@slack/bolt';
import type { Clock } from '../../src/core/clock.ts';
import type { Logger } from '../../src/core/logger.ts';
import { verifySlackSignature } from './signature.ts';

/** Set by the event listener when the gateway could not take the event (shutting down): answer 503 so Slack retries. */
export interface DeliveryOutcome {
  rejected: boolean;
}

/** The name under which each request's {@link DeliveryOutcome} reaches the listener's `context`. */
export const DELIVERY_PROPERTY = 'switchboardDelivery';

/** Options of {@link SlackHttpReceiver}. */
export interface SlackHttpReceiverOptions {
  signingSecret: string;
  clock: Clock;
  logger: Logger;
  /** The longest an event request waits for the event to be handed to the gateway before answering 200 (default 2.5 s; Slack retries after 3 s). */
  ackDeadlineMs?: number;
}

/**
 * A bolt receiver for the Events API on the gateway's own HTTP server (`POST /webhooks/slack/<account>`),
 * with web `Request`/`Response`. It checks the v0 signature and the timestamp (401 and nothing processed
 * otherwise), answers `url_verification`, and answers an event once the gateway has journaled it, which
 * takes milliseconds; the turn runs after the answer. After `ackDeadlineMs` it answers 200 regardless.
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
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((resolve) => { timer = setTimeout(resolve, 2000); })]);
    clearTimeout(timer);
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
    } catch {
      return jsonError(400, 'The Slack request body is not valid JSON or form data.', 'bad_request');
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
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([processing, new Promise((resolve) => { timer = setTimeout(resolve, this.options.ackDeadlineMs ?? 2500); })]);
    clearTimeout(timer);
    if (outcome.rejected) return jsonError(503, 'Switchboard is shutting down; Slack will retry.', 'unavailable');
    return ackBody === undefined || ackBody === '' ? new Response(null, { status: 200 }) : Response.json(ackBody);
  }
}

function parseBody(raw: string, contentType: string): Record<string, unknown> {
  if (contentType.includes('application/x-www-form-urlencoded')) {
    const form = Object.fromEntries(new URLSearchParams(raw));
    return typeof form.payload === 'string' ? JSON.parse(form.payload) as Record<string, unknown> : form;
  }
  const parsed: unknown = JSON.parse(raw);
  if (!parsed || typeof parsed !== 'object') throw new Error('not an object');
  return parsed as Record<string, unknown>;
}

function jsonError(status: number, message: string, type: string): Response {
  return Response.json({ error: { message, type, code: type } }, { status });
}
