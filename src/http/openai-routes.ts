import { randomUUID } from 'node:crypto';
import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { TurnEvents } from '../agent/turn-events.ts';
import type { MediaConfig } from '../config/media.ts';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { InboundSink, TurnResult } from '../core/channel-adapter.ts';
import type { Clock } from '../core/clock.ts';
import { BadRequestError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import type { Attachment, InboundMessage } from '../core/message.ts';
import type { MediaStore } from '../media/media-store.ts';
import type { HttpApp, HttpVariables } from './app.ts';
import { httpClientKey } from './client-key.ts';
import { errorBody, jsonError, readJson } from './http-error.ts';
import { checkTextBytes, MAX_ATTACHMENTS, storeUploads, type MediaUploadDeps } from './media-upload.ts';
import {
  agentForModel, failureOf, imagesOf, openAIUsage, parseRequest, replyOf, routableModels, sessionOf, textOf, type Failure, type RequestImage,
} from './openai-request.ts';

/** What the OpenAI-compatible routes need. */
export interface OpenAIRouteDeps {
  config: Pick<ResolvedConfig, 'agents' | 'providers'>;
  /** The gateway's sink: API calls go through the same lanes as every channel. */
  sink: InboundSink;
  /** Turn events, to tell why a turn failed (rate limit, context overflow...). */
  events: TurnEvents;
  clock: Clock;
  logger: Logger;
  startedAt: number;
  isClosing(): boolean;
  /** Waits until the turn's ledger records are on disk, so a caller can read them once answered. */
  flushLedger?(): Promise<void>;
  /** `gateway.authToken`: only a bearer token the gateway checks can name a rate-limit bucket (SPEC §14). */
  authToken?: string;
  /** The media store: images of `data:` URLs are stored there and handed on by hash (without it they are a 400). */
  media?: MediaStore;
  /** `config.media`: each image's limit (`maxBytes`). */
  mediaConfig?: Pick<MediaConfig, 'maxBytes'>;
  /** `gateway.maxBodyBytes`: what a body may hold besides the images of its last user message. */
  maxBodyBytes?: number;
}

type ApiContext = Context<{ Variables: HttpVariables }>;

/** Text deltas of a streaming turn, buffered until the SSE stream is ready to take them. */
class DeltaRelay {
  readonly buffered: string[] = [];
  /** Resolves at the first delta. */
  readonly started: Promise<void>;
  private target: ((text: string) => void) | undefined;
  private resolveStarted!: () => void;

  constructor() {
    this.started = new Promise<void>((resolve) => { this.resolveStarted = resolve; });
  }

  readonly push = (text: string): void => {
    if (this.target) this.target(text);
    else {
      this.buffered.push(text);
      this.resolveStarted();
    }
  };

  attach(target: ((text: string) => void) | undefined): void {
    this.target = target;
  }
}

/** A submitted API turn: its result (after the ledger is flushed) and why it failed, if it did. */
interface RunningTurn {
  sessionKey?: string;
  done: Promise<TurnResult | undefined>;
  failure(result: TurnResult | undefined): Failure;
}

const succeeded = (result: TurnResult | undefined): result is TurnResult =>
  Boolean(result) && result!.outcome !== 'failed' && result!.outcome !== 'stopped';

/** `POST /v1/chat/completions` and `GET /v1/models` (SPEC §7). */
export function mountOpenAIRoutes(deps: OpenAIRouteDeps): (app: HttpApp) => void {
  return (app) => {
    app.get('/v1/models', (c) => c.json(modelList(deps)));
    app.post('/v1/chat/completions', (c) => chatCompletion(c, deps));
  };
}

/** What `model` may name: the agents (by id), then each agent's model (a provider's model no agent uses would be a 404). */
function modelList(deps: OpenAIRouteDeps): { object: 'list'; data: Record<string, unknown>[] } {
  const created = Math.floor(deps.startedAt / 1000);
  const data = routableModels(deps.config.agents).map(({ id, agent, kind }) => (kind === 'agent'
    ? { id, object: 'model', created, owned_by: 'switchboard', agent: { id: agent.id, name: agent.name, model: agent.model, provider: agent.providerId } }
    : { id, object: 'model', created, owned_by: agent.providerId }));
  return { object: 'list', data };
}

/**
 * The attachments of the last user message's images: `data:` URLs decoded and stored (each within
 * `media.maxBytes`; a refused one stores nothing), `https:` URLs passed to the model unfetched.
 */
async function imageAttachments(images: readonly RequestImage[], deps: OpenAIRouteDeps, signal: AbortSignal): Promise<Attachment[]> {
  if (images.length > MAX_ATTACHMENTS) throw new BadRequestError(`At most ${MAX_ATTACHMENTS} images in the last user message; it has ${images.length}.`, 'too_many_attachments');
  const data = images.filter((i) => i.kind === 'data');
  const media: MediaUploadDeps | undefined = deps.media && deps.mediaConfig ? { store: deps.media, maxBytes: deps.mediaConfig.maxBytes } : undefined;
  if (data.length && !media) throw new BadRequestError('This gateway takes no data: image URLs (it has no media store); send an https: URL.', 'attachments_unsupported');
  const stored = data.length ? await storeUploads(data.map((d, i) => ({ name: `image-${i + 1}.${d.mime.slice(6).replace(/\+.*$/, '')}`, mime: d.mime, dataBase64: d.dataBase64, field: d.field })), media!, signal) : [];
  let next = 0;
  return images.map((image): Attachment => (image.kind === 'data'
    ? stored[next++]!.attachment
    : { type: 'image', fileId: 'url', passThroughUrl: image.url, name: image.url.split(/[?#]/)[0]!.split('/').pop() || 'image' }));
}

/** Characters of every image URL in the messages (a client sends earlier images again with the history). */
function imageUrlChars(messages: readonly { content?: unknown }[]): number {
  let chars = 0;
  for (const m of messages) {
    if (!Array.isArray(m.content)) continue;
    for (const part of m.content as { image_url?: unknown }[]) {
      const image = part?.image_url;
      const url = typeof image === 'string' ? image : (image as { url?: unknown } | undefined)?.url;
      if (typeof url === 'string') chars += url.length;
    }
  }
  return chars;
}

/**
 * One chat completion. The last user message is the turn's input, its text and its images; the session keeps
 * its own history, so earlier and system messages of the request are not used: their images are neither
 * decoded nor stored (only checked as parts of the body).
 */
async function chatCompletion(c: ApiContext, deps: OpenAIRouteDeps): Promise<Response> {
  const correlationId = c.get('correlationId');
  const body = parseRequest(await readJson(c));
  const lastIndex = body.messages.findLastIndex((m) => m.role === 'user');
  const last = lastIndex >= 0 ? body.messages[lastIndex] : undefined;
  const text = last ? textOf(last.content).trim() : '';
  const images = last ? imagesOf(last.content, `messages[${lastIndex}]`) : [];
  checkTextBytes(c.req.header('content-length'), imageUrlChars(body.messages), deps.maxBodyBytes);
  if (!text && !images.length) throw new BadRequestError('messages must contain a user message with text or images; the last one is the turn\'s input.', 'invalid_value');
  const session = sessionOf(c.req.header('x-session-key'), body.user);
  const agent = session?.agentId ? deps.config.agents.find((a) => a.id === session.agentId) : agentForModel(deps.config.agents, body.model);
  if (!agent && !session?.agentId) {
    const notFound = errorBody(404, `The model \`${body.model}\` does not exist: use an agent id (${deps.config.agents.map((a) => a.id).join(', ')}) or a model GET /v1/models lists.`, 'model_not_found');
    // OpenAI answers an unknown model with this type and names the parameter; clients that read either get the same.
    return c.json({ error: { ...notFound.error, type: 'invalid_request_error', param: 'model' } }, 404, { 'X-Correlation-Id': correlationId });
  }
  if (!agent) throw new BadRequestError(`No agent "${session?.agentId}" is configured.`, 'invalid_session_key');
  const attachments = await imageAttachments(images, deps, c.req.raw.signal);
  const peer = session?.name ?? `oneoff-${randomUUID()}`;
  const message: InboundMessage = {
    id: randomUUID(), channel: 'api', accountId: 'default', chatType: 'direct', chatId: peer, peerId: peer,
    sender: { id: peer, ...(session ? { name: session.name } : {}) }, text, attachments, mentionsBot: true,
    receivedAt: deps.clock.now(), correlationId, agentId: agent.id, dmScope: 'per-channel-peer', ephemeral: !session,
    rateLimitKey: `api:${httpClientKey(c, deps.authToken)}`,
  };
  const relay = body.stream === true ? new DeltaRelay() : undefined;
  const abort = new AbortController();
  const turn = await submit(c, deps, message, abort, relay);
  if (turn && 'retryAfterSeconds' in turn) {
    return c.json(errorBody(429, `Too many requests from this client; try again in ${turn.retryAfterSeconds} s.`, 'rate_limit_exceeded'), 429, { 'Retry-After': String(turn.retryAfterSeconds), 'X-Correlation-Id': correlationId });
  }
  if (!turn) return jsonError(c, 400, 'The message was not accepted.', 'not_accepted');
  const headers: Record<string, string> = { 'X-Correlation-Id': correlationId, ...(turn.sessionKey ? { 'X-Session-Key': turn.sessionKey } : {}) };
  const id = `chatcmpl-${randomUUID().replace(/-/g, '')}`;
  const created = Math.floor(deps.clock.now() / 1000);

  if (!relay) {
    const result = await turn.done;
    if (!succeeded(result)) return failureResponse(c, turn.failure(result), headers);
    return c.json({
      id, object: 'chat.completion', created, model: result.model ?? agent.model, system_fingerprint: null,
      choices: [{ index: 0, message: { role: 'assistant', content: replyOf(result), refusal: null }, finish_reason: 'stop', logprobs: null }],
      usage: openAIUsage(result.usage),
    }, 200, { ...headers, 'X-Session-Id': result.sessionId, ...(result.usageEstimated ? { 'X-Usage-Estimated': 'true' } : {}) });
  }

  // Wait for the first token (or the end) before answering, so a turn that fails early gets a real HTTP error.
  const early = await Promise.race([relay.started.then(() => undefined), turn.done.then((result) => ({ result }))]);
  if (early && !succeeded(early.result)) return failureResponse(c, turn.failure(early.result), headers);
  return sseResponse(c, headers, { id, created, model: agent.model, includeUsage: body.stream_options?.include_usage === true, relay, turn, abort });
}

/** Hands the message to the gateway; undefined when it was not accepted. Cleans up when the turn ends. */
async function submit(c: ApiContext, deps: OpenAIRouteDeps, message: InboundMessage, abort: AbortController, relay?: DeltaRelay): Promise<RunningTurn | { retryAfterSeconds: number } | undefined> {
  const correlationId = message.correlationId as string;
  const logger = deps.logger.child({ correlationId, channel: 'api' });
  const clientGone = () => abort.abort(new Error('the HTTP client went away'));
  c.req.raw.signal.addEventListener('abort', clientGone, { once: true });
  let llmError: string | undefined;
  const unsubscribe = deps.events.subscribe({ onLlmCall: (e) => { if (e.correlationId === correlationId && e.error) llmError = e.error; } });
  const cleanup = () => {
    unsubscribe();
    c.req.raw.signal.removeEventListener('abort', clientGone);
  };
  let submission;
  try {
    submission = await deps.sink(message, { signal: abort.signal, ...(relay ? { onDelta: relay.push } : {}) });
  } catch (error) {
    cleanup();
    throw error;
  }
  if (submission.status === 'rate_limited') {
    cleanup();
    return { retryAfterSeconds: submission.retryAfterSeconds ?? 60 };
  }
  if (submission.status !== 'accepted') {
    cleanup();
    logger.warn({ status: submission.status }, 'API message not accepted');
    return undefined;
  }
  const done = submission.done.then(async (result) => {
    await deps.flushLedger?.().catch((err: unknown) => logger.warn({ err }, 'token ledger flush failed'));
    return result;
  }).finally(cleanup);
  return {
    sessionKey: submission.sessionKey,
    done,
    failure: (result) => {
      const f = failureOf(result, llmError, deps.isClosing(), correlationId);
      logger.warn({ status: f.status, code: f.code, outcome: result?.outcome }, 'API turn did not reply');
      return f;
    },
  };
}

function failureResponse(c: ApiContext, f: Failure, headers: Record<string, string>): Response {
  return c.json(errorBody(f.status, f.message, f.code), f.status as 400, headers);
}

/**
 * The SSE answer (Hono's streamSSE): a role chunk, content deltas, the finish chunk, the usage chunk when
 * asked, `data: [DONE]`. A client that goes away aborts the turn.
 */
function sseResponse(c: ApiContext, headers: Record<string, string>, options: {
  id: string; created: number; model: string; includeUsage: boolean; relay: DeltaRelay; turn: RunningTurn; abort: AbortController;
}): Response {
  const { id, created, model, includeUsage, relay, turn } = options;
  for (const [name, value] of Object.entries(headers)) c.header(name, value);
  return streamSSE(c, async (stream) => {
    stream.onAbort(() => options.abort.abort(new Error('the HTTP client went away')));
    // Deltas arrive from a callback; writes go out one after another.
    let chain: Promise<void> = Promise.resolve();
    const write = (data: unknown) => {
      chain = chain.then(() => (stream.aborted ? undefined : stream.writeSSE({ data: typeof data === 'string' ? data : JSON.stringify(data) })));
    };
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      write({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: null, choices, ...(includeUsage ? { usage: null } : {}), ...extra });
    const delta = (content: string) => chunk([{ index: 0, delta: { content }, finish_reason: null, logprobs: null }]);
    chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null, logprobs: null }]);
    let streamed = '';
    const forward = (d: string) => { streamed += d; delta(d); };
    for (const d of relay.buffered.splice(0)) forward(d);
    relay.attach(forward);
    const result = await turn.done;
    relay.attach(undefined);
    if (succeeded(result)) {
      const reply = replyOf(result);
      // Command replies and notices arrive whole: send what was not streamed.
      if (!streamed) delta(reply);
      else if (reply.startsWith(streamed) && reply.length > streamed.length) delta(reply.slice(streamed.length));
      chunk([{ index: 0, delta: {}, finish_reason: 'stop', logprobs: null }]);
      if (includeUsage) chunk([], { usage: openAIUsage(result.usage) });
    } else {
      // Headers are sent: report the failure in-band, as OpenAI does (the client throws an APIError).
      const f = turn.failure(result);
      write(errorBody(f.status, f.message, f.code));
    }
    write('[DONE]');
    await chain;
  });
}
