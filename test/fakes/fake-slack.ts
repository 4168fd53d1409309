import { createHash, createHmac } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { parseMultipart, streamFile, type ServedFile } from './fake-telegram.ts';

/** Switchboard's own limit for one Slack message (SPEC §10); Slack itself truncates at 40,000. */
export const SLACK_FAKE_TEXT_LIMIT = 4000;

/**
 * A fake Slack on 127.0.0.1 for the real @slack/bolt: the Web API (`POST /api/<method>`, form or JSON
 * bodies, as @slack/web-api sends them) and a Socket Mode WebSocket server (`apps.connections.open` hands
 * out its URL; it says `hello`, sends envelopes and records acks), on one HTTP server.
 */

/** One Web API call the fake received. */
export interface SlackCall {
  method: string;
  body: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
  /** Epoch ms when it arrived. */
  at: number;
  /** The HTTP status the fake answered with. */
  status: number;
}

/** A scripted answer for one call of a method (used once, before the default). */
export interface ScriptedReply {
  status?: number;
  headers?: Record<string, string>;
  /** Merged into `{ ok: true }`; `{ ok: false, error: 'x' }` makes a platform error. */
  body?: Record<string, unknown>;
}

/** The bot the fake's `auth.test` reports. */
export interface FakeSlackIdentity {
  userId: string;
  botId: string;
  teamId: string;
}

/** The fake and its controls. */
export interface FakeSlack {
  /** Pass as SLACK_API_URL (`http://127.0.0.1:P/api/`). */
  apiUrl: string;
  identity: FakeSlackIdentity;
  calls: SlackCall[];
  /** Display names for `users.info`. */
  users: Record<string, string>;
  /**
   * Called with each Web API call before it is answered; `true` cuts the connection without an answer (a
   * reset before Slack took the request: nothing is recorded, nothing is done).
   */
  resetConnection?: (method: string, body: Record<string, unknown>) => boolean;
  /** Connections cut by {@link resetConnection}. */
  readonly resets: number;
  /** Queue a one-off answer for the next call of `method`. */
  script(method: string, reply: ScriptedReply): void;
  callsOf(method: string): SlackCall[];
  /** Resolves with the first call (past or future) of `method` matching `predicate`; rejects after `timeoutMs`. */
  waitFor(method: string, predicate?: (call: SlackCall) => boolean, timeoutMs?: number): Promise<SlackCall>;
  /** Envelope ids acknowledged so far, in order. */
  acks: string[];
  /** Number of open Socket Mode connections. */
  readonly sockets: number;
  /** Resolves once a Socket Mode client is connected (after `hello`). */
  waitForSocket(timeoutMs?: number): Promise<void>;
  /** Sends an `events_api` envelope; resolves with the client's ack (`{ envelope_id, payload? }`). */
  sendEnvelope(payload: Record<string, unknown>, options?: { envelopeId?: string; retryAttempt?: number; timeoutMs?: number }): Promise<Record<string, unknown>>;
  /** Sends a raw text frame (anything, not necessarily an envelope) to every Socket Mode client. */
  sendRaw(text: string): void;
  /** Asks every Socket Mode client to reconnect, as Slack does (`disconnect` message, then the client closes). */
  disconnectSockets(reason?: string): Promise<void>;
  /**
   * While true, Slack is down: `apps.connections.open` answers HTTP 503 and Socket Mode upgrades are cut
   * (other Web API methods answer as usual).
   */
  down: boolean;
  /** From now on `apps.connections.open` refuses the app token with this error (`token_revoked`, `invalid_auth`, …). */
  revokeAppToken(error?: string): void;
  /** Cuts every Socket Mode connection without a close frame (the network dropped it). */
  dropSockets(): void;
  /**
   * Whether the workspace offers native streaming (`chat.startStream` / `appendStream` / `stopStream`; default
   * true). False: the three answer `unknown_method`, as a workspace without them does.
   */
  nativeStreaming: boolean;
  /** What each message the bot posted or streamed shows now, by ts (`streaming` while its stream is open). */
  shown: Map<string, ShownMessage>;
  /** Serves a file at its `url_private` on the fake (bot token required); returns the file object for an event's `files`. */
  addFile(file: FakeSlackFile): Record<string, unknown>;
  /** `url_private` downloads, in order (with the Authorization header they came with). */
  readonly downloads: SlackDownload[];
  /** Files uploaded through `files.getUploadURLExternal` → upload URL → `files.completeUploadExternal`. */
  readonly uploads: SlackUpload[];
  /** Closes everything (Socket Mode clients gracefully, with a close frame). */
  close(): Promise<void>;
}

/** A file the fake serves at a `url_private` (SPEC §15 media tests). */
export interface FakeSlackFile extends ServedFile {
  name: string;
  mimetype?: string;
  /** `size` the file object announces (default the real size). */
  announcedSize?: number;
  originalW?: number;
  originalH?: number;
  durationMs?: number;
  /** `slack_audio` for a clip recorded in Slack. */
  subtype?: string;
  /** The download is answered with this status (and no file). */
  status?: number;
  /** The download is answered 302 to this URL. */
  redirectTo?: string;
}

/** One `url_private` download. */
export interface SlackDownload {
  path: string;
  authorization?: string;
  status: number;
  bytesSent: number;
  aborted: boolean;
}

/** One file uploaded with the files.uploadV2 flow. */
export interface SlackUpload {
  fileId: string;
  filename: string;
  /** Bytes received at the upload URL (none until then). */
  size?: number;
  sha256?: string;
  /** Set by files.completeUploadExternal. */
  completed: boolean;
  channel?: string;
  threadTs?: string;
}

/** One message as the fake shows it. */
export interface ShownMessage {
  channel: string;
  text: string;
  threadTs?: string;
  /** True from `chat.startStream` until `chat.stopStream`. */
  streaming: boolean;
}

/** Starts the fake. `identity` defaults to team T1, bot user UBOT, bot id BBOT. */
export async function startFakeSlack(options: { identity?: Partial<FakeSlackIdentity>; appToken?: string; botToken?: string } = {}): Promise<FakeSlack> {
  const identity: FakeSlackIdentity = { userId: 'UBOT', botId: 'BBOT', teamId: 'T1', ...options.identity };
  const events = new EventEmitter();
  events.setMaxListeners(100);
  const calls: SlackCall[] = [];
  const scripts = new Map<string, ScriptedReply[]>();
  const sockets = new Set<WebSocket>();
  const users: Record<string, string> = {};
  let tsCounter = 1_700_000_100;
  let tickets = 0;
  let envelopes = 0;
  const acks: string[] = [];
  let revoked: string | undefined;
  const shown = new Map<string, ShownMessage>();
  const files = new Map<string, FakeSlackFile>();
  /** The file objects handed out, for files.info. */
  const fileObjects = new Map<string, Record<string, unknown>>();
  const downloads: SlackDownload[] = [];
  const uploads: SlackUpload[] = [];
  let fileCounter = 0;
  const str = (value: unknown) => (typeof value === 'string' ? value : '');
  const tooLong = (text: unknown) => typeof text === 'string' && [...text].length > SLACK_FAKE_TEXT_LIMIT;
  /** The open stream of `b.channel`/`b.ts`, or the error Slack answers (a method missing here: `unknown_method`). */
  const openStream = (b: Record<string, unknown>): ShownMessage | { ok: false; error: string } => {
    if (!fake.nativeStreaming) return { ok: false, error: 'unknown_method' };
    const message = shown.get(str(b.ts));
    if (!message || message.channel !== b.channel) return { ok: false, error: 'message_not_found' };
    if (!message.streaming) return { ok: false, error: 'message_not_in_streaming_state' };
    return message;
  };

  const handlers: Record<string, (body: Record<string, unknown>, headers: IncomingMessage['headers']) => Record<string, unknown>> = {
    'auth.test': () => ({ url: 'https://fake.slack.com/', team: 'Fake Team', user: 'switchboard', team_id: identity.teamId, user_id: identity.userId, bot_id: identity.botId }),
    'chat.postMessage': (b) => {
      // Switchboard keeps to 4,000 characters a message (SPEC §10): anything longer is a renderer bug, refused here.
      if (typeof b.text === 'string' && [...b.text].length > SLACK_FAKE_TEXT_LIMIT) return { ok: false, error: 'msg_too_long' };
      const ts = `${tsCounter++}.000200`;
      shown.set(ts, { channel: str(b.channel), text: str(b.text), ...(b.thread_ts ? { threadTs: str(b.thread_ts) } : {}), streaming: false });
      return { channel: b.channel, ts, message: { type: 'message', text: b.text, user: identity.userId, bot_id: identity.botId, ts, ...(b.thread_ts ? { thread_ts: b.thread_ts } : {}) } };
    },
    'reactions.add': (b) => (b.channel && b.timestamp && b.name ? {} : { ok: false, error: 'invalid_arguments' }),
    'chat.update': (b) => {
      if (typeof b.text === 'string' && [...b.text].length > SLACK_FAKE_TEXT_LIMIT) return { ok: false, error: 'msg_too_long' };
      if (!b.ts) return { ok: false, error: 'message_not_found' };
      const message = shown.get(str(b.ts));
      if (message) message.text = str(b.text);
      return { channel: b.channel, ts: b.ts, text: b.text };
    },
    // Native streaming: into a thread only; outside a DM the recipient is named; each call appends markdown.
    'chat.startStream': (b) => {
      if (!fake.nativeStreaming) return { ok: false, error: 'unknown_method' };
      if (!b.channel || !b.thread_ts || typeof b.markdown_text !== 'string') return { ok: false, error: 'invalid_arguments' };
      if (!str(b.channel).startsWith('D') && (!b.recipient_user_id || !b.recipient_team_id)) return { ok: false, error: 'missing_recipient_user_id' };
      if (tooLong(b.markdown_text)) return { ok: false, error: 'msg_too_long' };
      const ts = `${tsCounter++}.000200`;
      shown.set(ts, { channel: str(b.channel), text: b.markdown_text, threadTs: str(b.thread_ts), streaming: true });
      return { channel: b.channel, ts };
    },
    'chat.appendStream': (b) => {
      const message = openStream(b);
      if ('error' in message) return message;
      if (typeof b.markdown_text !== 'string' || !b.markdown_text) return { ok: false, error: 'invalid_arguments' };
      if (tooLong(message.text + b.markdown_text)) return { ok: false, error: 'msg_too_long' };
      message.text += b.markdown_text;
      return { channel: b.channel, ts: b.ts };
    },
    'chat.stopStream': (b) => {
      const message = openStream(b);
      if ('error' in message) return message;
      if (typeof b.markdown_text === 'string') message.text += b.markdown_text;
      message.streaming = false;
      return { channel: b.channel, ts: b.ts, message: { text: message.text } };
    },
    'users.info': (b) => {
      const name = users[String(b.user)];
      return name ? { user: { id: b.user, name: name.toLowerCase(), real_name: name, profile: { display_name: name, real_name: name } } } : { ok: false, error: 'user_not_found' };
    },
    'files.info': (b) => {
      const file = fileObjects.get(str(b.file));
      return file ? { file } : { ok: false, error: 'file_not_found' };
    },
    'files.getUploadURLExternal': (b) => {
      if (!b.filename || !Number(b.length)) return { ok: false, error: 'invalid_arguments' };
      const fileId = `FUP${++fileCounter}`;
      uploads.push({ fileId, filename: str(b.filename), completed: false });
      return { upload_url: `http://127.0.0.1:${port}/upload/v1/${fileId}`, file_id: fileId };
    },
    'files.completeUploadExternal': (b) => {
      const listed = JSON.parse(str(b.files) || '[]') as { id: string; title?: string }[];
      const found = listed.map((f) => uploads.find((u) => u.fileId === f.id));
      if (!listed.length || found.some((u) => !u || u.size === undefined)) return { ok: false, error: 'file_not_found' };
      for (const upload of found) Object.assign(upload!, { completed: true, ...(b.channel_id ? { channel: str(b.channel_id) } : {}), ...(b.thread_ts ? { threadTs: str(b.thread_ts) } : {}) });
      return { files: listed.map((f) => ({ id: f.id, title: f.title ?? '' })) };
    },
    'apps.connections.open': (_b, headers) => {
      const auth = String(headers.authorization ?? '');
      if (revoked) return { ok: false, error: revoked };
      if (options.appToken && auth !== `Bearer ${options.appToken}`) return { ok: false, error: 'invalid_auth' };
      if (!auth.startsWith('Bearer xapp-')) return { ok: false, error: 'not_allowed_token_type' };
      return { url: `ws://127.0.0.1:${port}/link/?ticket=t${++tickets}` };
    },
  };

  let resets = 0;
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const pathname = new URL(req.url ?? '/', 'http://x').pathname;
    if (req.method === 'GET' && pathname.startsWith('/files-pri/')) return serveFile(req, res, pathname);
    if (req.method === 'POST' && pathname.startsWith('/upload/v1/')) return receiveUpload(req, res, pathname, Buffer.concat(chunks));
    const raw = Buffer.concat(chunks).toString();
    const method = pathname.replace(/^\/api\//, '');
    const type = String(req.headers['content-type'] ?? '');
    let body: Record<string, unknown>;
    try {
      body = type.includes('json') ? JSON.parse(raw || '{}') : Object.fromEntries(new URLSearchParams(raw));
    } catch {
      body = {};
    }
    if (fake.down && method === 'apps.connections.open') {
      calls.push({ method, body, headers: req.headers, at: Date.now(), status: 503 });
      res.writeHead(503, { 'content-type': 'text/plain' }).end('Service Unavailable');
      return;
    }
    if (fake.resetConnection?.(method, body)) {
      resets++;
      req.socket.destroy();
      return;
    }
    const scripted = scripts.get(method)?.shift();
    const status = scripted?.status ?? 200;
    const call: SlackCall = { method, body, headers: req.headers, at: Date.now(), status };
    calls.push(call);
    if (scripted) {
      res.writeHead(status, { 'content-type': 'application/json', ...scripted.headers });
      res.end(JSON.stringify({ ok: status === 200, ...scripted.body }));
    } else {
      const handler = handlers[method];
      const answer = handler ? { ok: true, ...handler(body, req.headers) } : { ok: false, error: 'unknown_method' };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    }
    events.emit('call', call);
  });

  /** `GET /files-pri/<team>-<id>/<name>`: a registered file, only with the bot token, as Slack serves `url_private`. */
  async function serveFile(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const id = /^\/files-pri\/[^/-]+-([^/]+)\//.exec(path)?.[1] ?? '';
    const file = files.get(id);
    const authorization = req.headers.authorization;
    const download: SlackDownload = { path, status: 200, bytesSent: 0, aborted: false, ...(authorization ? { authorization } : {}) };
    downloads.push(download);
    const authorized = options.botToken ? authorization === `Bearer ${options.botToken}` : /^Bearer xoxb-/.test(authorization ?? '');
    const fail = (status: number) => { download.status = status; res.writeHead(status, { 'content-type': 'text/plain' }).end('no'); };
    if (!authorized) return fail(401);
    if (!file) return fail(404);
    if (file.status) return fail(file.status);
    if (file.redirectTo) {
      download.status = 302;
      res.writeHead(302, { location: file.redirectTo }).end();
      return;
    }
    await streamFile(req, res, { ...file, contentType: file.contentType ?? file.mimetype }, download);
  }

  /** `POST /upload/v1/<file id>`: the bytes of a files.uploadV2 upload (multipart, or the raw body). */
  function receiveUpload(req: IncomingMessage, res: ServerResponse, path: string, body: Buffer): void {
    const upload = uploads.find((u) => u.fileId === path.slice('/upload/v1/'.length));
    if (!upload) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('unknown upload');
      return;
    }
    const type = String(req.headers['content-type'] ?? '');
    const bytes = type.startsWith('multipart/form-data') ? parseMultipart(body, type).files[0]?.bytes ?? Buffer.alloc(0) : body;
    Object.assign(upload, { size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`OK - ${bytes.length}`);
  }

  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    if (!req.url?.startsWith('/link') || fake.down) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.add(ws);
      ws.on('close', () => sockets.delete(ws));
      ws.on('message', (data: Buffer) => {
        try {
          const message = JSON.parse(data.toString()) as Record<string, unknown>;
          if (typeof message.envelope_id === 'string') {
            acks.push(message.envelope_id);
            events.emit(`ack:${message.envelope_id}`, message);
          }
        } catch {
          // not JSON: ignore
        }
      });
      ws.send(JSON.stringify({ type: 'hello', num_connections: sockets.size, debug_info: { host: 'fake', approximate_connection_time: 18060 }, connection_info: { app_id: 'A1' } }));
      events.emit('socket');
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const waitEvent = <T>(subscribe: (done: (value: T) => void) => () => void, timeoutMs: number, what: string) => new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => { unsubscribe(); reject(new Error(`fake Slack: timed out waiting for ${what}`)); }, timeoutMs);
    const unsubscribe = subscribe((value) => { clearTimeout(timer); unsubscribe(); resolve(value); });
  });

  const fake: FakeSlack = {
    downloads,
    uploads,
    addFile(file) {
      const id = `F${String(++fileCounter).padStart(8, '0')}`;
      files.set(id, file);
      const url = `http://127.0.0.1:${port}/files-pri/${identity.teamId}-${id}/${encodeURIComponent(file.name)}`;
      const object = {
        id, name: file.name, title: file.name, size: file.announcedSize ?? file.bytes.length, url_private: url, url_private_download: `${url}?download=1`,
        ...(file.mimetype ? { mimetype: file.mimetype } : {}),
        ...(file.originalW && file.originalH ? { original_w: file.originalW, original_h: file.originalH } : {}),
        ...(file.durationMs !== undefined ? { duration_ms: file.durationMs } : {}),
        ...(file.subtype ? { subtype: file.subtype } : {}),
      };
      fileObjects.set(id, object);
      return object;
    },
    get resets() { return resets; },
    down: false,
    revokeAppToken(error = 'token_revoked') { revoked = error; },
    nativeStreaming: true,
    shown,
    dropSockets() { for (const ws of sockets) ws.terminate(); },
    apiUrl: `http://127.0.0.1:${port}/api/`,
    identity,
    calls,
    users,
    acks,
    script(method, reply) {
      const list = scripts.get(method) ?? [];
      list.push(reply);
      scripts.set(method, list);
    },
    callsOf: (method) => calls.filter((c) => c.method === method),
    waitFor(method, predicate = () => true, timeoutMs = 5000) {
      const match = (c: SlackCall) => c.method === method && c.status === 200 && predicate(c);
      const found = calls.find(match);
      if (found) return Promise.resolve(found);
      return waitEvent<SlackCall>((done) => {
        const listener = (c: SlackCall) => { if (match(c)) done(c); };
        events.on('call', listener);
        return () => events.off('call', listener);
      }, timeoutMs, method);
    },
    get sockets() { return sockets.size; },
    waitForSocket(timeoutMs = 5000) {
      if (sockets.size) return Promise.resolve();
      return waitEvent<void>((done) => {
        const listener = () => done();
        events.on('socket', listener);
        return () => events.off('socket', listener);
      }, timeoutMs, 'a Socket Mode connection');
    },
    sendEnvelope(payload, opts = {}) {
      const envelopeId = opts.envelopeId ?? `env-${++envelopes}`;
      const ack = waitEvent<Record<string, unknown>>((done) => {
        const listener = (m: Record<string, unknown>) => done(m);
        events.on(`ack:${envelopeId}`, listener);
        return () => events.off(`ack:${envelopeId}`, listener);
      }, opts.timeoutMs ?? 5000, `the ack of ${envelopeId}`);
      const envelope = { envelope_id: envelopeId, type: 'events_api', payload, accepts_response_payload: false, retry_attempt: opts.retryAttempt ?? 0, retry_reason: opts.retryAttempt ? 'timeout' : '' };
      for (const ws of sockets) ws.send(JSON.stringify(envelope));
      return ack;
    },
    sendRaw(text) {
      for (const ws of sockets) ws.send(text);
    },
    async disconnectSockets(reason = 'refresh_requested') {
      await Promise.all([...sockets].map((ws) => new Promise<void>((resolve) => {
        ws.once('close', () => resolve());
        ws.send(JSON.stringify({ type: 'disconnect', reason, debug_info: { host: 'fake' } }));
      })));
    },
    async close() {
      // Close frames from our side: the client answers them and cleans up without its 30 s handshake timer.
      await Promise.all([...sockets].map((ws) => new Promise<void>((resolve) => {
        const timer = setTimeout(() => { ws.terminate(); resolve(); }, 1000);
        ws.once('close', () => { clearTimeout(timer); resolve(); });
        ws.close(1000);
      })));
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return fake;
}

/** Headers of a request signed like Slack's (`X-Slack-Signature`, `X-Slack-Request-Timestamp`). */
export function slackSignedHeaders(signingSecret: string, rawBody: string, timestampSec = Math.floor(Date.now() / 1000)): Record<string, string> {
  const signature = `v0=${createHmac('sha256', signingSecret).update(`v0:${timestampSec}:${rawBody}`).digest('hex')}`;
  return { 'content-type': 'application/json', 'x-slack-request-timestamp': String(timestampSec), 'x-slack-signature': signature };
}

let eventCounter = 0;

/** An Events API `event_callback` around `event`, as Slack posts it. */
export function eventCallback(event: Record<string, unknown>, options: { eventId?: string; teamId?: string; botUserId?: string } = {}): Record<string, unknown> {
  const teamId = options.teamId ?? 'T1';
  return {
    token: 'legacy-verification-token',
    team_id: teamId,
    api_app_id: 'A1',
    event,
    type: 'event_callback',
    event_id: options.eventId ?? `Ev${String(++eventCounter).padStart(6, '0')}`,
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ enterprise_id: null, team_id: teamId, user_id: options.botUserId ?? 'UBOT', is_bot: true, is_enterprise_install: false }],
    is_ext_shared_channel: false,
  };
}

let tsSeq = 1_700_000_000;

/** A fresh message ts (`seconds.micro`). */
export function nextTs(): string {
  return `${++tsSeq}.000100`;
}

/** A `message.im` event. */
export function dmEvent(text: string, options: { user?: string; channel?: string; ts?: string; threadTs?: string } = {}): Record<string, unknown> {
  return {
    type: 'message', channel_type: 'im', channel: options.channel ?? 'D123', user: options.user ?? 'U42', text,
    ts: options.ts ?? nextTs(), team: 'T1', ...(options.threadTs ? { thread_ts: options.threadTs } : {}),
  };
}

/** An `app_mention` event in a channel. */
export function mentionEvent(text: string, options: { user?: string; channel?: string; ts?: string; threadTs?: string; botUserId?: string } = {}): Record<string, unknown> {
  return {
    type: 'app_mention', channel: options.channel ?? 'C777', user: options.user ?? 'U42', text: `<@${options.botUserId ?? 'UBOT'}> ${text}`,
    ts: options.ts ?? nextTs(), team: 'T1', ...(options.threadTs ? { thread_ts: options.threadTs } : {}),
  };
}

/** A `message.channels` event (no mention unless the text has one). */
export function channelMessageEvent(text: string, options: { user?: string; channel?: string; ts?: string; threadTs?: string } = {}): Record<string, unknown> {
  return {
    type: 'message', channel_type: 'channel', channel: options.channel ?? 'C777', user: options.user ?? 'U42', text,
    ts: options.ts ?? nextTs(), team: 'T1', ...(options.threadTs ? { thread_ts: options.threadTs } : {}),
  };
}
