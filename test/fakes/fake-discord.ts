import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { parseMultipart, streamFile, type ServedFile, type UploadedPart } from './fake-telegram.ts';

/**
 * A fake Discord on 127.0.0.1 for the real discord.js: the REST API under `/api/v10` and the Gateway
 * (HELLO, IDENTIFY → READY, GUILD_CREATE, heartbeats, dispatches) on one HTTP server.
 */

/** One REST call the fake received. */
export interface DiscordRestCall {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown> | undefined;
  /** The status the fake answered with. */
  status: number;
  /** Epoch ms when it arrived. */
  at: number;
  /** The file parts of a multipart request (uploads); its `payload_json` is `body`. */
  files?: UploadedPart[];
}

/** A file the fake serves as an attachment on its own host (SPEC §15 media tests). */
export interface FakeAttachmentFile extends ServedFile {
  name: string;
  /** `size` the attachment announces (default the real size). */
  announcedSize?: number;
  width?: number;
  height?: number;
  /** A voice message's length (`duration_secs`; the attachment then has a waveform). */
  durationSecs?: number;
  /** The download is answered with this status (and no file). */
  status?: number;
  /** The download is answered 302 to this URL. */
  redirectTo?: string;
}

/** One attachment download the fake served (or refused). */
export interface DiscordDownload {
  path: string;
  status: number;
  bytesSent: number;
  aborted: boolean;
  /** The Authorization header it came with (Discord's CDN needs none). */
  authorization?: string;
}

/** A user as Discord sends it. */
export interface FakeUser {
  id: string;
  username: string;
  global_name?: string | null;
  bot?: boolean;
}

/** A guild for GUILD_CREATE. */
export interface FakeGuild {
  id: string;
  name?: string;
  channels: { id: string; name?: string; type?: number }[];
  threads?: { id: string; parent_id: string; name?: string; type?: number }[];
  /** The role Discord manages for the bot in this guild (mentioning it addresses the bot). */
  botRoleId?: string;
}

/** Options of {@link startFakeDiscord}. */
export interface FakeDiscordOptions {
  token?: string;
  bot?: FakeUser;
  guilds?: FakeGuild[];
  heartbeatMs?: number;
  /** Close the gateway with this code right after IDENTIFY (4004 bad token, 4014 disallowed intents). */
  closeOnIdentify?: number;
  /** Never answer IDENTIFY (a gateway that hangs). */
  silentOnIdentify?: boolean;
}

/** The fake and its controls. */
export interface FakeDiscord {
  /** Pass as DISCORD_API_BASE / `rest.api`. */
  api: string;
  token: string;
  bot: FakeUser;
  calls: DiscordRestCall[];
  heartbeats: number;
  identifies: number;
  /** Whether a gateway connection is open now (a client between two connections has none). */
  readonly connected: boolean;
  /** Drops the gateway connection without a close frame (the client resumes). */
  dropConnection(): void;
  /** Closes the gateway connection with a close frame of this code (4004: the token was reset meanwhile). */
  closeConnection(code: number, reason?: string): void;
  /** While true, every new gateway connection is cut at once, before HELLO (a gateway that is down). */
  refuseGateway: boolean;
  /** Gateway RESUMEs received. */
  resumes: number;
  /** `POST /channels/:id/messages` answered with an earlier message because its enforced nonce was seen. */
  deduplicated: number;
  /** Sends a dispatch event to the connected client. */
  dispatch(t: string, d: unknown): void;
  /** Sends a raw text frame (anything, not necessarily JSON) to the connected client. */
  sendRaw(text: string): void;
  /** Dispatches MESSAGE_CREATE, filling every field Discord sends; returns the payload. Kept in the channel's history. */
  message(fields: FakeMessageFields): Record<string, unknown>;
  /** A message posted while no client is connected: only in the channel's history (`GET /channels/:id/messages`). */
  postOffline(fields: FakeMessageFields): Record<string, unknown>;
  /** Gateway connections open now. */
  readonly connections: number;
  /** Shards of the IDENTIFYs received (`[id, count]`), in order. */
  identifiedShards: unknown[];
  /**
   * Called with each REST call before it is handled; `true` cuts the connection without an answer (a reset
   * before Discord took the request: nothing is recorded, nothing is done).
   */
  resetConnection?: (method: string, path: string, body: Record<string, any> | undefined) => boolean;
  /** Connections cut by {@link resetConnection}. */
  readonly resets: number;
  /** The next REST call matching `match` is answered with this 5xx status (Discord's gateway being unwell). */
  failOnce(match: (method: string, path: string) => boolean, status: number): void;
  /** The next REST call matching `match` is answered 429 with `retry_after` seconds. */
  rateLimitOnce(match: (method: string, path: string) => boolean, retryAfterSeconds?: number): void;
  /** Resolves with the first call (recorded or future) matching `match`. */
  waitForCall(match: (call: DiscordRestCall) => boolean, timeoutMs?: number): Promise<DiscordRestCall>;
  /** `POST /channels/:id/messages` calls answered 200, optionally for one channel. */
  posts(channelId?: string): DiscordRestCall[];
  /** Serves a file at `<host>/attachments/<id>/<name>`; returns the attachment object for a MESSAGE_CREATE. */
  addAttachment(file: FakeAttachmentFile): Record<string, unknown>;
  /** Attachment downloads, in order. */
  readonly downloads: DiscordDownload[];
  close(): Promise<void>;
}

/** What a test sets on a message; the rest is filled in. */
export interface FakeMessageFields {
  channel_id: string;
  content: string;
  author?: FakeUser;
  id?: string;
  guild_id?: string;
  /** 1 = DM, 0 = guild text, 11 = public thread. Defaults from `guild_id`. */
  channel_type?: number;
  mentions?: FakeUser[];
  mention_roles?: string[];
  referenced_message?: Record<string, unknown>;
  attachments?: Record<string, unknown>[];
  /** Message flags (8192: a voice message). */
  flags?: number;
}

let nextSnowflake = 1_300_000_000_000_000_000n;
/** A fresh numeric snowflake id. */
export function snowflake(): string {
  nextSnowflake += 1n;
  return nextSnowflake.toString();
}

const iso = () => new Date().toISOString();

export async function startFakeDiscord(options: FakeDiscordOptions = {}): Promise<FakeDiscord> {
  const token = options.token ?? 'fake-discord-token.XYZ';
  const bot: FakeUser = options.bot ?? { id: '1000000000000000001', username: 'switchboard', global_name: null, bot: true };
  const guilds = options.guilds ?? [];
  const events = new EventEmitter();
  const sockets = new Set<WebSocket>();
  const rateLimits: { match: (method: string, path: string) => boolean; retryAfter: number }[] = [];
  const failures: { match: (method: string, path: string) => boolean; status: number }[] = [];
  let resets = 0;
  let port = 0;
  let seq = 0;
  let socket: WebSocket | undefined;
  /** Messages created with an enforced nonce, by `<channel>:<nonce>`. */
  const nonces = new Map<string, Record<string, unknown>>();
  /** Every message created, per channel, in id order (the REST history). */
  const history = new Map<string, Record<string, unknown>[]>();
  const attachmentFiles = new Map<string, FakeAttachmentFile>();
  const downloads: DiscordDownload[] = [];

  /** DM channels seen in messages, so that a client that lost its cache can fetch them as Discord allows. */
  const dmChannels = new Map<string, FakeUser>();
  const channelById = (id: string) => {
    const recipient = dmChannels.get(id);
    if (recipient) return { id, type: 1, recipients: [userPayload(recipient)], last_message_id: null, flags: 0 };
    for (const g of guilds) {
      const c = g.channels.find((x) => x.id === id);
      if (c) return channelPayload(g.id, c);
      const t = g.threads?.find((x) => x.id === id);
      if (t) return threadPayload(g.id, t, bot.id);
    }
    return undefined;
  };

  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const buffer = Buffer.concat(chunks);
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    const method = req.method ?? 'GET';
    if (method === 'GET' && path.startsWith('/attachments/')) return serveAttachment(req, res, path);
    const type = String(req.headers['content-type'] ?? '');
    const form = type.startsWith('multipart/form-data') ? parseMultipart(buffer, type) : undefined;
    const raw = form ? (form.fields.payload_json ?? '') : buffer.toString();
    const call: DiscordRestCall = { method, path, headers: req.headers, body: raw ? safeJson(raw) : undefined, status: 200, at: Date.now(), ...(form ? { files: form.files } : {}) };
    const reply = (status: number, body?: unknown, headers: Record<string, string> = {}) => {
      call.status = status;
      fake.calls.push(call);
      if (body === undefined) res.writeHead(status, headers).end(); // 204 without content-type, as Discord does
      else res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
      events.emit('call', call);
    };
    if (fake.resetConnection?.(method, path, call.body)) {
      resets++;
      req.socket.destroy();
      return;
    }
    if (req.headers.authorization !== `Bot ${token}`) return reply(401, { message: '401: Unauthorized', code: 0 });
    const failing = failures.findIndex((f) => f.match(method, path));
    if (failing >= 0) return reply(failures.splice(failing, 1)[0]!.status, { message: 'Service Unavailable', code: 0 });
    const limited = rateLimits.findIndex((r) => r.match(method, path));
    if (limited >= 0) {
      const retryAfter = rateLimits.splice(limited, 1)[0]?.retryAfter ?? 0;
      return reply(429, { message: 'You are being rate limited.', retry_after: retryAfter, global: false }, {
        'retry-after': String(retryAfter), 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '0',
        'x-ratelimit-reset-after': String(retryAfter), 'x-ratelimit-bucket': 'fake-bucket', 'x-ratelimit-scope': 'user',
      });
    }
    let m: RegExpExecArray | null;
    if (method === 'GET' && path === '/api/v10/gateway/bot') {
      return reply(200, { url: `ws://127.0.0.1:${port}/gateway`, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 14_400_000, max_concurrency: 1 } });
    }
    if (method === 'GET' && path === '/api/v10/users/@me') return reply(200, userPayload(bot));
    if (method === 'POST' && /^\/api\/v10\/channels\/\d+\/typing$/.test(path)) return reply(204);
    if (method === 'PUT' && /^\/api\/v10\/channels\/\d+\/messages\/\d+\/reactions\/[^/]+\/@me$/.test(path)) return reply(204);
    if (method === 'POST' && (m = /^\/api\/v10\/channels\/(\d+)\/messages$/.exec(path))) {
      const body = call.body ?? {};
      const refused = invalidContent(body.content);
      if (refused) return reply(400, { message: 'Invalid Form Body', code: 50035, errors: { content: { _errors: [{ code: 'BASE_TYPE_BAD_LENGTH', message: refused }] } } });
      // As Discord: a nonce of more than 25 characters is refused; with enforce_nonce, a nonce seen before
      // in that channel answers the message it created then instead of creating another.
      if (body.nonce !== undefined && (typeof body.nonce === 'string' ? body.nonce.length > 25 : !Number.isInteger(body.nonce))) {
        return reply(400, { message: 'Invalid Form Body', code: 50035, errors: { nonce: { _errors: [{ code: 'BASE_TYPE_BAD_LENGTH', message: 'Must be 25 or fewer in length.' }] } } });
      }
      const nonceKey = body.enforce_nonce === true && body.nonce !== undefined ? `${m[1]}:${JSON.stringify(body.nonce)}` : undefined;
      const earlier = nonceKey ? nonces.get(nonceKey) : undefined;
      if (earlier) {
        fake.deduplicated++;
        return reply(200, earlier);
      }
      const created = messagePayload({ id: snowflake(), channel_id: m[1]!, author: bot, content: typeof body.content === 'string' ? body.content : '' });
      if (Array.isArray(body.embeds)) created.embeds = body.embeds;
      if (call.files?.length) {
        created.attachments = call.files.map((f) => ({ id: snowflake(), filename: f.filename ?? 'file', size: f.size, url: `http://127.0.0.1:${port}/attachments/sent/${f.filename ?? 'file'}`, proxy_url: `http://127.0.0.1:${port}/attachments/sent/${f.filename ?? 'file'}` }));
      }
      if (nonceKey) nonces.set(nonceKey, created);
      return reply(200, created);
    }
    if (method === 'PATCH' && (m = /^\/api\/v10\/channels\/(\d+)\/messages\/(\d+)$/.exec(path))) {
      const refused = invalidContent(call.body?.content);
      if (refused) return reply(400, { message: 'Invalid Form Body', code: 50035, errors: { content: { _errors: [{ code: 'BASE_TYPE_BAD_LENGTH', message: refused }] } } });
      return reply(200, messagePayload({ id: m[2]!, channel_id: m[1]!, author: bot, content: typeof call.body?.content === 'string' ? call.body.content : '' }));
    }
    if (method === 'GET' && (m = /^\/api\/v10\/channels\/(\d+)\/messages$/.exec(path))) {
      // As Discord: with `after`, the `limit` oldest messages newer than it, sent newest first.
      const query = new URL(req.url ?? '/', 'http://x').searchParams;
      const after = BigInt(query.get('after') ?? '0');
      const limit = Number(query.get('limit') ?? '50');
      const newer = (history.get(m[1]!) ?? []).filter((p) => BigInt(String(p.id)) > after).slice(0, limit);
      return reply(200, newer.reverse());
    }
    if (method === 'GET' && (m = /^\/api\/v10\/channels\/(\d+)$/.exec(path))) {
      const channel = channelById(m[1]!);
      return channel ? reply(200, channel) : reply(404, { message: 'Unknown Channel', code: 10003 });
    }
    return reply(404, { message: '404: Not Found', code: 0 });
  });

  /** `GET /attachments/<id>/<name>`: a registered file, as Discord's CDN serves it (no auth needed). */
  async function serveAttachment(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const id = path.split('/')[2] ?? '';
    const file = attachmentFiles.get(id);
    const download: DiscordDownload = { path, status: 200, bytesSent: 0, aborted: false, ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) };
    downloads.push(download);
    events.emit('download', download);
    if (!file || file.status) {
      download.status = file?.status ?? 404;
      res.writeHead(download.status, { 'content-type': 'text/plain' }).end('no such attachment');
      return;
    }
    if (file.redirectTo) {
      download.status = 302;
      res.writeHead(302, { location: file.redirectTo }).end();
      return;
    }
    await streamFile(req, res, file, download);
  }

  const wss = new WebSocketServer({ server, path: '/gateway' });
  const send = (ws: WebSocket, payload: unknown) => ws.send(JSON.stringify(payload));
  /** A dispatch on one connection (answers to its own IDENTIFY or RESUME go there, not to the latest one). */
  const dispatchTo = (ws: WebSocket, t: string, d: unknown) => send(ws, { op: 0, t, s: ++seq, d });
  wss.on('connection', (ws) => {
    if (fake.refuseGateway) {
      ws.terminate();
      return;
    }
    sockets.add(ws);
    socket = ws;
    ws.on('close', () => {
      sockets.delete(ws);
      if (socket === ws) socket = [...sockets].at(-1);
    });
    send(ws, { op: 10, d: { heartbeat_interval: options.heartbeatMs ?? 41_250 }, s: null, t: null });
    ws.on('message', (data: Buffer) => {
      const packet = safeJson(data.toString()) as { op?: number; d?: { token?: string; shard?: unknown } } | undefined;
      if (packet?.op === 1) {
        fake.heartbeats++;
        send(ws, { op: 11, d: null, s: null, t: null });
      } else if (packet?.op === 6) {
        fake.resumes++;
        dispatchTo(ws, 'RESUMED', {});
      } else if (packet?.op === 2) {
        fake.identifies++;
        fake.identifiedShards.push(packet.d?.shard);
        if (packet.d?.token !== token) return ws.close(4004, 'Authentication failed.');
        if (options.closeOnIdentify) return ws.close(options.closeOnIdentify, 'Disallowed intent(s).');
        if (options.silentOnIdentify) return undefined;
        dispatchTo(ws, 'READY', {
          v: 10, user: userPayload(bot), session_id: 'fake-session', resume_gateway_url: `ws://127.0.0.1:${port}/gateway`,
          guilds: guilds.map((g) => ({ id: g.id, unavailable: true })), private_channels: [], shard: packet.d.shard ?? [0, 1],
          application: { id: bot.id, flags: 0 },
        });
        for (const g of guilds) dispatchTo(ws, 'GUILD_CREATE', guildPayload(g, bot));
      }
    });
  });

  const fake: FakeDiscord = {
    api: '',
    token,
    bot,
    calls: [],
    heartbeats: 0,
    identifies: 0,
    get connected() { return socket?.readyState === WebSocket.OPEN; },
    resumes: 0,
    deduplicated: 0,
    refuseGateway: false,
    closeConnection(code, reason = 'Authentication failed.') {
      socket?.close(code, reason);
    },
    dropConnection() {
      socket?.terminate();
      socket = undefined;
    },
    dispatch(t, d) {
      if (!socket) throw new Error('fake discord: no gateway connection');
      send(socket, { op: 0, t, s: ++seq, d });
    },
    sendRaw(text) {
      if (!socket) throw new Error('fake discord: no gateway connection');
      socket.send(text);
    },
    message(fields) {
      const payload = fake.postOffline(fields);
      fake.dispatch('MESSAGE_CREATE', payload);
      return payload;
    },
    get connections() { return sockets.size; },
    get resets() { return resets; },
    failOnce(match, status) { failures.push({ match, status }); },
    identifiedShards: [],
    postOffline(fields) {
      const payload = messagePayload({
        id: fields.id ?? snowflake(),
        channel_id: fields.channel_id,
        author: fields.author ?? { id: '2000000000000000002', username: 'alice', global_name: 'Alice' },
        content: fields.content,
        mentions: fields.mentions,
        mention_roles: fields.mention_roles,
        attachments: fields.attachments,
        referenced_message: fields.referenced_message,
      });
      if (!fields.guild_id) dmChannels.set(fields.channel_id, fields.author ?? { id: '2000000000000000002', username: 'alice', global_name: 'Alice' });
      if (fields.guild_id) {
        payload.guild_id = fields.guild_id;
        payload.member = { roles: [], joined_at: iso(), deaf: false, mute: false, flags: 0 };
      }
      payload.channel_type = fields.channel_type ?? (fields.guild_id ? 0 : 1);
      if (fields.flags !== undefined) payload.flags = fields.flags;
      const list = history.get(fields.channel_id) ?? [];
      list.push(payload);
      list.sort((a, b) => (BigInt(String(a.id)) < BigInt(String(b.id)) ? -1 : 1));
      history.set(fields.channel_id, list);
      return payload;
    },
    rateLimitOnce(match, retryAfterSeconds = 0.05) {
      rateLimits.push({ match, retryAfter: retryAfterSeconds });
    },
    waitForCall(match, timeoutMs = 5000) {
      const found = fake.calls.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const onCall = (call: DiscordRestCall) => {
          if (!match(call)) return;
          clearTimeout(timer);
          events.off('call', onCall);
          resolve(call);
        };
        const timer = setTimeout(() => {
          events.off('call', onCall);
          reject(new Error(`fake discord: no matching REST call within ${timeoutMs} ms; calls: ${fake.calls.map((c) => `${c.method} ${c.path} ${c.status}`).join(', ')}`));
        }, timeoutMs);
        events.on('call', onCall);
      });
    },
    downloads,
    addAttachment(file) {
      const id = snowflake();
      attachmentFiles.set(id, file);
      const url = `http://127.0.0.1:${port}/attachments/${id}/${encodeURIComponent(file.name)}`;
      return {
        id, filename: file.name, size: file.announcedSize ?? file.bytes.length, url, proxy_url: url,
        ...(file.contentType ? { content_type: file.contentType } : {}),
        ...(file.width && file.height ? { width: file.width, height: file.height } : {}),
        ...(file.durationSecs !== undefined ? { duration_secs: file.durationSecs, waveform: 'AAAA' } : {}),
      };
    },
    posts(channelId) {
      return fake.calls.filter((c) => c.method === 'POST' && c.status === 200 && /\/messages$/.test(c.path)
        && (!channelId || c.path === `/api/v10/channels/${channelId}/messages`));
    },
    close: () => new Promise<void>((resolve) => {
      for (const ws of sockets) ws.terminate();
      wss.close();
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  fake.api = `http://127.0.0.1:${port}/api`;
  return fake;
}

function safeJson(text: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

function userPayload(u: FakeUser): Record<string, unknown> {
  return { id: u.id, username: u.username, discriminator: '0', global_name: u.global_name ?? null, avatar: null, bot: u.bot ?? false };
}

function messagePayload(m: {
  id: string; channel_id: string; author: FakeUser; content: string; mentions?: FakeUser[]; mention_roles?: string[];
  attachments?: Record<string, unknown>[]; referenced_message?: Record<string, unknown>;
}): Record<string, unknown> {
  return {
    id: m.id, channel_id: m.channel_id, author: userPayload(m.author), content: m.content, timestamp: iso(), edited_timestamp: null,
    tts: false, mention_everyone: false, mentions: (m.mentions ?? []).map(userPayload), mention_roles: m.mention_roles ?? [],
    attachments: m.attachments ?? [], embeds: [], pinned: false, type: m.referenced_message ? 19 : 0,
    ...(m.referenced_message ? { referenced_message: m.referenced_message, message_reference: { type: 0, message_id: m.referenced_message.id, channel_id: m.channel_id } } : {}),
  };
}

function channelPayload(guildId: string, c: FakeGuild['channels'][number]): Record<string, unknown> {
  return {
    id: c.id, type: c.type ?? 0, guild_id: guildId, name: c.name ?? `channel-${c.id.slice(-4)}`, position: 0, permission_overwrites: [],
    parent_id: null, nsfw: false, topic: null, last_message_id: null, rate_limit_per_user: 0, flags: 0,
  };
}

function threadPayload(guildId: string, t: NonNullable<FakeGuild['threads']>[number], ownerId: string): Record<string, unknown> {
  return {
    id: t.id, type: t.type ?? 11, guild_id: guildId, parent_id: t.parent_id, name: t.name ?? `thread-${t.id.slice(-4)}`, owner_id: ownerId,
    last_message_id: null, rate_limit_per_user: 0, message_count: 0, member_count: 1, flags: 0,
    thread_metadata: { archived: false, auto_archive_duration: 1440, archive_timestamp: iso(), locked: false },
  };
}

function guildPayload(g: FakeGuild, bot: FakeUser): Record<string, unknown> {
  const roles: Record<string, unknown>[] = [
    { id: g.id, name: '@everyone', color: 0, hoist: false, position: 0, permissions: '1071698660929', managed: false, mentionable: false, flags: 0 },
  ];
  if (g.botRoleId) {
    roles.push({ id: g.botRoleId, name: bot.username, color: 0, hoist: false, position: 1, permissions: '2048', managed: true, mentionable: true, flags: 0, tags: { bot_id: bot.id } });
  }
  return {
    id: g.id, name: g.name ?? `guild-${g.id.slice(-4)}`, icon: null, splash: null, discovery_splash: null, owner_id: '2000000000000000009',
    afk_channel_id: null, afk_timeout: 300, verification_level: 0, default_message_notifications: 0, explicit_content_filter: 0,
    roles, emojis: [], stickers: [], features: [], mfa_level: 0, application_id: null, system_channel_id: null, system_channel_flags: 0,
    rules_channel_id: null, vanity_url_code: null, description: null, banner: null, premium_tier: 0, preferred_locale: 'en-US',
    public_updates_channel_id: null, nsfw_level: 0, premium_progress_bar_enabled: false,
    joined_at: iso(), large: false, unavailable: false, member_count: 2, voice_states: [], presences: [], stage_instances: [], guild_scheduled_events: [],
    members: [{ user: userPayload(bot), roles: g.botRoleId ? [g.botRoleId] : [], joined_at: iso(), deaf: false, mute: false, flags: 0 }],
    channels: g.channels.map((c) => channelPayload(g.id, c)),
    threads: (g.threads ?? []).map((t) => threadPayload(g.id, t, bot.id)),
  };
}

/** Discord refuses content over 2,000 characters (code points) and text that is not valid UTF-16: why, or undefined. */
function invalidContent(content: unknown): string | undefined {
  if (typeof content !== 'string') return undefined;
  if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(content)) return 'Content is not valid Unicode (a lone surrogate).';
  const length = [...content].length;
  return length > 2000 ? `Must be 2000 or fewer in length (${length}).` : undefined;
}
