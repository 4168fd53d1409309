import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { ChannelStatus, SubmitOptions, Submission, TurnResult } from '../core/channel-adapter.ts';
import type { MediaConfig } from '../config/media.ts';
import { BadRequestError, SwitchboardError } from '../core/errors.ts';
import { outboundText, type Attachment } from '../core/message.ts';
import type { MediaStore } from '../media/media-store.ts';
import type { HttpApp } from './app.ts';
import { jsonError, readJson } from './http-error.ts';
import { httpClientKey } from './client-key.ts';
import { linkFiles, mediaLink, type LinkedFile, type ReplyFile } from './media-routes.ts';
import { checkTextBytes, storeUploads, webchatUploads, type MediaUploadDeps, type StoredUpload } from './media-upload.ts';

/** A reply sent to a web chat user outside a request. */
export interface WebchatLaterReply {
  text: string;
  /** Files the reply carries (linked as `/media/<sha256>?name=…` before they reach the page). */
  files?: ReplyFile[];
  kind: string;
  at: number;
}

/** The web chat channel as its routes see it (`channels/webchat`, wired by `src/main.ts`). */
export interface WebchatEndpoint {
  readonly status: ChannelStatus;
  /** Submits what `user` typed; the turn's own replies come back in `done`. `rateLimitKey`: whom `limits.perSender` counts it against. */
  submit(user: string, text: string, options?: SubmitOptions & { correlationId?: string; rateLimitKey?: string; attachments?: Attachment[] }): Promise<Submission>;
  /** Hands `user`'s later replies to `listener` until the returned function is called; `close` when the channel stops (at once when it has). */
  subscribe(user: string, listener: { reply(push: WebchatLaterReply): void; close(): void }): () => void;
}

/** What the web chat routes need. */
export interface WebchatRouteDeps {
  channel: WebchatEndpoint;
  /** The session key of `user`'s web chat (told to a page when it subscribes, so it can show the history). */
  sessionKeyFor?: (user: string) => string | undefined;
  /** Whether a session has an entry yet (a page loads the history of one that has). */
  sessionExists?: (key: string) => Promise<boolean>;
  /** Comment lines that keep an idle event stream open through proxies (default every 15 s). */
  heartbeatMs?: number;
  /** `gateway.authToken`: only a bearer token the gateway checks can name a rate-limit bucket (SPEC §14). */
  authToken?: string;
  /** The media store: `attachments` are stored there and handed on by hash (without it a message with attachments is a 400). */
  media?: MediaStore;
  /** `config.media`: each attachment's limit (`maxBytes`). */
  mediaConfig?: Pick<MediaConfig, 'maxBytes'>;
  /** `gateway.maxBodyBytes`: what a body may hold besides its attachments. */
  maxBodyBytes?: number;
  /**
   * Cluster mode: later replies of work other replicas ran (a goal's batches, a sub-agent's result), handed to the
   * pages open here besides the ones this replica's web chat sends.
   */
  laterReplies?: { subscribe(user: string, listener: { reply(push: WebchatLaterReply): void; close(): void }): () => void };
}

const USER = /^[\w.@+-]{1,128}$/;

class WebchatStoppedError extends SwitchboardError {
  constructor() {
    super('CHANNEL_STOPPED', 'The web chat is not running; try again once the gateway is back.', { status: 503 });
  }
}

/** Reply text of a finished turn: every reply, notices first. */
const replyText = (result: TurnResult | undefined) => (result?.replies ?? []).map(outboundText).filter(Boolean).join('\n\n');

/** The user's own stored attachments, as the answer tells the page (to show them with their links). */
const linkedUploads = (stored: readonly StoredUpload[]): LinkedFile[] =>
  stored.map(({ stored: s, name }) => ({ name, mime: s.mime, size: s.size, sha256: s.sha256, url: mediaLink(s.sha256, name) }));

/** A turn's answer: session, reply text, the files its replies carry, the user's attachments. */
async function answerOf(submission: Submission, result: TurnResult | undefined, uploads: readonly StoredUpload[], media: MediaUploadDeps | undefined) {
  const files = await linkFiles((result?.replies ?? []).flatMap((r) => r.files ?? []), media);
  return {
    sessionKey: submission.sessionKey, sessionId: result?.sessionId, reply: replyText(result), correlationId: submission.correlationId,
    ...(files.length ? { files } : {}), ...(uploads.length ? { attachments: linkedUploads(uploads) } : {}),
  };
}

function checkedUser(user: unknown): string {
  if (user === undefined) return 'web';
  if (typeof user !== 'string' || !USER.test(user)) throw new BadRequestError('Field "user" must be 1-128 letters, digits or . _ @ + -.', 'invalid_user');
  return user;
}

/** 429 in OpenAI's error shape with `Retry-After` (SPEC §14). */
function rateLimited(c: Context, retryAfterSeconds: number): Response {
  c.header('retry-after', String(retryAfterSeconds));
  return jsonError(c, 429, `Too many messages from you; try again in ${retryAfterSeconds} s.`, 'rate_limit_exceeded');
}

/**
 * The web chat over HTTP (SPEC §7):
 * - `POST /webchat/messages` `{ user, text, attachments?: [{ name, mime, dataBase64 }] }` answers `{ sessionKey,
 *   sessionId, reply, correlationId, files?, attachments? }`, or, with `Accept: text/event-stream`, `delta`
 *   `{ text }` events then `done` (same fields). `files`: what the replies carry, `attachments`: the user's own,
 *   stored; each `{ name, mime, size, sha256, url }`. With attachments `text` may be empty. A refusal (400, 413,
 *   429 with `Retry-After`, 503) is a JSON error before any stream opens; a refused upload stores nothing.
 * - `GET /webchat/events?user=NAME`: `ready` `{ user, sessionKey, exists }`, then a `reply` `{ text, kind, at }` for
 *   every reply sent to that user outside a request (a sub-agent's result, a goal's background batches), in
 *   cluster mode whichever replica ran it (`laterReplies`).
 */
export function mountWebchatRoutes(deps: WebchatRouteDeps): (app: HttpApp) => void {
  const { channel } = deps;
  const media: MediaUploadDeps | undefined = deps.media && deps.mediaConfig ? { store: deps.media, maxBytes: deps.mediaConfig.maxBytes } : undefined;
  return (app) => {
    app.post('/webchat/messages', async (c) => {
      if (channel.status !== 'running') throw new WebchatStoppedError();
      const raw = await readJson(c);
      const body = (typeof raw === 'object' && raw !== null ? raw : {}) as { user?: unknown; text?: unknown; attachments?: unknown };
      const given = webchatUploads(body.attachments);
      checkTextBytes(c.req.header('content-length'), given.reduce((n, u) => n + u.dataBase64.length, 0), deps.maxBodyBytes);
      const text = body.text ?? (given.length ? '' : undefined);
      if (typeof text !== 'string' || (!text.trim() && !given.length)) throw new BadRequestError('Field "text" must be a non-empty string (it may be empty when there are attachments).', 'invalid_text');
      const user = checkedUser(body.user);
      if (given.length && !media) throw new BadRequestError('This gateway takes no attachments in the web chat (it has no media store).', 'attachments_unsupported');
      // Tells the channel when the page went away (its answer then goes to the user's open pages); it never
      // cancels the turn (the runtime keeps a web chat turn going, SPEC §11).
      const signal = c.req.raw.signal;
      const correlationId = c.get('correlationId');
      // `user` is the client's choice: the bucket is the name from this client (its address, and the gateway's
      // token when it sends it), so nobody elsewhere can use up someone's bucket by writing under their name (SPEC §14).
      const rateLimitKey = `webchat:${user}@${httpClientKey(c, deps.authToken)}`;
      const uploads = given.length && media ? await storeUploads(given, media, signal) : [];
      const attachments = uploads.map((u) => u.attachment);
      if (!(c.req.header('accept') ?? '').includes('text/event-stream')) {
        const submission = await channel.submit(user, text, { signal, correlationId, rateLimitKey, attachments });
        if (submission.status === 'rate_limited') return rateLimited(c, submission.retryAfterSeconds ?? 60);
        const result = await submission.done;
        return c.json(await answerOf(submission, result, uploads, media));
      }
      const early: string[] = [];
      let forward = (delta: string) => { early.push(delta); };
      // Accepted or refused (JSON error) before the stream opens.
      const submission = await channel.submit(user, text, { onDelta: (d) => forward(d), signal, correlationId, rateLimitKey, attachments });
      if (submission.status === 'rate_limited') return rateLimited(c, submission.retryAfterSeconds ?? 60);
      c.header('x-accel-buffering', 'no');
      return streamSSE(c, async (stream) => {
        let chain: Promise<void> = Promise.resolve();
        const send = (delta: string) => {
          chain = chain.then(() => stream.writeSSE({ event: 'delta', data: JSON.stringify({ text: delta }) }));
        };
        for (const delta of early.splice(0)) send(delta);
        forward = send;
        const result = await submission.done;
        await chain;
        await stream.writeSSE({ event: 'done', data: JSON.stringify(await answerOf(submission, result, uploads, media)) });
      });
    });

    app.get('/webchat/events', async (c) => {
      const user = checkedUser(c.req.query('user'));
      let sessionKey: string | undefined;
      try {
        sessionKey = deps.sessionKeyFor?.(user);
      } catch { /* a page without the key still gets the replies */ }
      const exists = sessionKey !== undefined && deps.sessionExists ? await deps.sessionExists(sessionKey).catch(() => false) : false;
      c.header('x-accel-buffering', 'no');
      c.header('cache-control', 'no-store');
      return streamSSE(c, async (stream) => {
        await stream.writeSSE({ event: 'ready', data: JSON.stringify({ user, sessionKey, exists }) });
        let heartbeat: NodeJS.Timeout | undefined;
        let unsubscribe = () => undefined as void;
        await new Promise<void>((resolve) => {
          let chain: Promise<void> = Promise.resolve();
          stream.onAbort(resolve);
          const page = {
            reply: (push: WebchatLaterReply) => {
              chain = chain.then(async () => {
                const files = await linkFiles(push.files, media);
                await stream.writeSSE({ event: 'reply', data: JSON.stringify({ ...push, ...(files.length ? { files } : {}) }) });
              }).catch(resolve);
            },
            close: resolve,
          };
          const local = channel.subscribe(user, page);
          const remote = deps.laterReplies?.subscribe(user, page);
          unsubscribe = () => { local(); remote?.(); };
          heartbeat = setInterval(() => { stream.write(': keep-alive\n\n').catch(resolve); }, deps.heartbeatMs ?? 15_000);
          heartbeat.unref();
        }).finally(() => {
          clearInterval(heartbeat);
          unsubscribe();
        });
      });
    });
  };
}
