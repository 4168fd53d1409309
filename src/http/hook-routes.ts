import type { Context, MiddlewareHandler } from 'hono';
import { bearerAuth } from 'hono/bearer-auth';
import { z } from 'zod';
import type { RefusalEvent } from '../agent/turn-events.ts';
import type { ResolvedConfig } from '../config/resolved.ts';
import { deliverToSchema, type DeliverToConfig } from '../config/scheduler.ts';
import type { InboundSink } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import { BadRequestError, ConfigError } from '../core/errors.ts';
import { internalMessage } from '../core/internal-message.ts';
import type { Logger } from '../core/logger.ts';
import { outboundText, type DeliveryTarget } from '../core/message.ts';
import { SenderRateLimiter, type RateBuckets } from '../gateway/rate-limit.ts';
import { buildSessionKey, parseSessionKey } from '../routing/session-key.ts';
import type { JobsService } from '../scheduler/jobs.ts';
import type { HttpApp, HttpVariables } from './app.ts';
import { clientAddress } from './client-key.ts';
import { jsonError, readJson } from './http-error.ts';
import { parseBody } from './job-routes.ts';

/** Paths under this prefix are the webhooks': opened by `hooks.token` only, never by the gateway's token. */
export const HOOK_PATH_PREFIX = '/hooks/';

/** Whether a request path is a webhook's (the gateway's auth leaves it to {@link mountHookRoutes}). */
export const isHookPath = (path: string): boolean => path.startsWith(HOOK_PATH_PREFIX);

/** What the webhook routes need. */
export interface HookRouteDeps {
  /** `hooks.token`: empty, nothing is mounted. */
  token: string;
  /** The gateway's sink: `/hooks/agent` runs its turn through the whole pipeline (journal, lanes, accounting). */
  sink: InboundSink;
  /** `/hooks/wake` queues a heartbeat through it. */
  jobs: Pick<JobsService, 'wake'>;
  /** Agents (the default session's agent), channels (checking `deliverTo`), `limits.perSender`, `gateway.authToken`. */
  config: Pick<ResolvedConfig, 'agents' | 'channels' | 'limits' | 'gateway'>;
  clock: Clock;
  logger: Logger;
  /** Told of each call refused by `limits.perSender` (the runtime's turn events: `/metrics` counts refusals by reason). */
  onRefusal?: (event: RefusalEvent) => void;
  /** Cluster mode: the buckets the replicas share (default: this process's memory). */
  rateBuckets?: RateBuckets;
}

/** Characters a bearer token may have (RFC 6750 b64token), as Hono's bearerAuth checks them. */
const TOKEN_CHARS = /^[A-Za-z0-9._~+/-]+=*$/;

/** The body of `POST /hooks/agent`. */
export const hookAgentSchema = z.strictObject({
  message: z.string().max(1_000_000).refine((s) => s.trim().length > 0, 'must be a non-empty string'),
  sessionKey: z.string().min(1).max(500).optional(),
  agentId: z.string().min(1).max(100).optional(),
  deliverTo: deliverToSchema.optional(),
});
export type HookAgentBody = z.output<typeof hookAgentSchema>;

/**
 * With `hooks.token` set, wraps the app's `browserAuth` so that the gateway's bearer check passes `/hooks/*`
 * on to {@link mountHookRoutes}, which checks the hooks token instead. Without it, `inner` unchanged (the
 * webhooks are off, and `/hooks/*` needs the gateway's token like any unknown route).
 */
export function withHookAuthExemption(
  hooksToken: string, inner?: (c: Context) => 'allow' | Response | undefined,
): ((c: Context) => 'allow' | Response | undefined) | undefined {
  if (!hooksToken) return inner;
  return (c) => (isHookPath(c.req.path) ? 'allow' : inner?.(c));
}

/** The platform chat a `deliverTo` names, as the outbound side takes it (a group is a `channel` on Discord and Slack, as for jobs). */
export function deliveryTargetOf(to: DeliverToConfig): DeliveryTarget {
  const thread = to.threadId ? { threadId: to.threadId } : {};
  if (to.peer) return { channel: to.channel, accountId: to.accountId, chatId: to.peer, chatType: 'direct', peerId: to.peer, ...thread };
  return { channel: to.channel, accountId: to.accountId, chatId: to.group ?? '', chatType: to.channel === 'telegram' || to.channel === 'webchat' ? 'group' : 'channel', ...thread };
}

/** A `deliverTo` naming a channel account this gateway does not run is a 400 (else the answer could never be delivered). */
function checkTarget(config: HookRouteDeps['config'], to: DeliverToConfig): void {
  if (to.channel === 'webchat') {
    if (!config.channels.webchat.enabled) throw new BadRequestError('deliverTo.channel "webchat": the web chat is off (channels.webchat.enabled).', 'invalid_deliver_to');
    return;
  }
  const accounts = config.channels[to.channel];
  if (!accounts.some((a) => a.accountId === to.accountId && a.enabled)) {
    const known = accounts.filter((a) => a.enabled).map((a) => a.accountId);
    throw new BadRequestError(`deliverTo: no enabled ${to.channel} account "${to.accountId}"${known.length ? ` (configured: ${known.join(', ')})` : ` (channels.${to.channel} has none)`}.`, 'invalid_deliver_to');
  }
}

/** The session a hook turn runs in: the given key (canonical), else `agent:<agentId or the first agent>:main`. */
export function hookSessionKey(config: Pick<ResolvedConfig, 'agents'>, body: Pick<HookAgentBody, 'sessionKey' | 'agentId'>): string {
  const agents = config.agents.map((a) => a.id);
  const known = (id: string, field: string) => {
    if (!agents.includes(id)) throw new BadRequestError(`${field}: no agent "${id}" is configured (${agents.join(', ')}).`, 'unknown_agent');
  };
  if (body.agentId !== undefined) known(body.agentId, 'agentId');
  if (body.sessionKey !== undefined) {
    let parsed;
    try {
      parsed = parseSessionKey(body.sessionKey);
    } catch (error) {
      throw new BadRequestError(`sessionKey: ${(error as Error).message}`, 'invalid_session_key');
    }
    if (body.agentId !== undefined && body.agentId.toLowerCase() !== parsed.agentId) {
      throw new BadRequestError(`sessionKey "${parsed.key}" belongs to agent "${parsed.agentId}", not to agentId "${body.agentId}".`, 'invalid_session_key');
    }
    known(parsed.agentId, 'sessionKey');
    return parsed.key;
  }
  const agentId = body.agentId ?? agents[0] ?? 'main';
  return buildSessionKey({ agentId, channel: 'internal', accountId: 'default', chatType: 'direct', peerId: 'hook' }, { dmScope: 'main', threads: 'separate', identityLinks: {} });
}

/**
 * Webhooks (SPEC §17), mounted only when `hooks.token` is set. `POST /hooks/agent { message, sessionKey?,
 * agentId?, deliverTo? }` submits an `internal` message (kind `hook`) through the gateway's sink, waits for
 * the turn and answers 200 `{ sessionKey, sessionId, correlationId, reply, outcome }`; the answer also goes
 * to `deliverTo` when given. A caller that goes away does not stop the turn. `POST /hooks/wake` queues a
 * heartbeat (202 `{ queued: true }`; 409 when none is configured). Both need `Authorization: Bearer
 * <hooks.token>` (compared in constant time); the gateway's token does not open them, and the app's auth must
 * exempt them ({@link withHookAuthExemption}). Both count against `limits.perSender` per caller address
 * (`hook:<address>`): over it, 429 with `Retry-After`.
 */
export function mountHookRoutes(deps: HookRouteDeps): (app: HttpApp) => void {
  const { token, config } = deps;
  if (!token) return () => undefined;
  if (!TOKEN_CHARS.test(token)) {
    throw new ConfigError('hooks.token (SWITCHBOARD_HOOKS_TOKEN) may only hold A-Z a-z 0-9 . _ ~ + / - (and = at the end), so that callers can send it as a bearer token.');
  }
  if (config.gateway.authToken && token === config.gateway.authToken) {
    throw new ConfigError('hooks.token (SWITCHBOARD_HOOKS_TOKEN) must differ from gateway.authToken: a webhook caller must not be able to use the rest of the API.');
  }
  const refuse = (c: Context) => jsonError(c, 401, 'Missing or wrong bearer token: send Authorization: Bearer <hooks.token>.', 'unauthorized');
  const bearer = bearerAuth<{ Variables: HttpVariables }>({ token, noAuthenticationHeader: { message: refuse }, invalidAuthenticationHeader: { message: refuse }, invalidToken: { message: refuse } });
  const guard: MiddlewareHandler<{ Variables: HttpVariables }> = async (c, next) => (isHookPath(c.req.path) ? bearer(c, next) : next());
  const limiter = new SenderRateLimiter(config.limits.perSender, deps.clock, { buckets: deps.rateBuckets, logger: deps.logger });

  /** Takes a token of the caller's bucket; a Response when over `limits.perSender`. */
  const overLimit = async (c: Context<{ Variables: HttpVariables }>, rateLimitKey: string): Promise<Response | undefined> => {
    const decision = await limiter.take(rateLimitKey);
    if (decision.allowed) return undefined;
    const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
    deps.onRefusal?.({ reason: 'rate_limit', correlationId: c.get('correlationId'), channel: 'internal', at: deps.clock.now() });
    deps.logger.info({ correlationId: c.get('correlationId'), rateLimitKey, retryAfterSeconds: seconds }, 'webhook refused: the caller is over limits.perSender');
    return tooMany(c, seconds);
  };

  return (app) => {
    app.use('*', guard);
    app.post('/hooks/agent', async (c) => {
      const rateLimitKey = `hook:${clientAddress(c)}`;
      const body = parseBody(hookAgentSchema, await readJson(c));
      const sessionKey = hookSessionKey(config, body);
      if (body.deliverTo) checkTarget(config, body.deliverTo);
      const limited = await overLimit(c, rateLimitKey);
      if (limited) return limited;
      const message = {
        ...internalMessage({ kind: 'hook', sessionKey, ...(body.deliverTo ? { deliverTo: deliveryTargetOf(body.deliverTo) } : {}) }, body.message, deps.clock.now()),
        correlationId: c.get('correlationId'), rateLimitKey,
      };
      const submission = await deps.sink(message);
      if (submission.status === 'rate_limited') return tooMany(c, submission.retryAfterSeconds ?? 60);
      if (submission.status !== 'accepted') {
        return jsonError(c, 409, `The message was not run (${submission.status}); see the gateway log for correlation id ${submission.correlationId}.`, 'not_accepted');
      }
      const result = await submission.done;
      const reply = (result?.replies ?? []).map(outboundText).filter(Boolean).join('\n\n');
      return c.json({
        sessionKey: submission.sessionKey ?? sessionKey, ...(result?.sessionId ? { sessionId: result.sessionId } : {}),
        correlationId: submission.correlationId, reply, outcome: result?.outcome ?? 'failed',
      });
    });
    app.post('/hooks/wake', async (c) => {
      const limited = await overLimit(c, `hook:${clientAddress(c)}`);
      if (limited) return limited;
      if (!(await deps.jobs.wake())) return jsonError(c, 409, 'No heartbeat is configured (heartbeat in the config), so there is nothing to wake.', 'no_heartbeat');
      return c.json({ queued: true }, 202);
    });
  };
}

function tooMany(c: Context, seconds: number): Response {
  c.header('retry-after', String(seconds));
  return jsonError(c, 429, `Too many webhook calls from this client; try again in ${seconds} s.`, 'rate_limit_exceeded');
}
