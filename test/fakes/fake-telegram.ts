import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One Bot API call the fake received. */
export interface TelegramCall {
  method: string;
  body: Record<string, any>;
  /** Epoch ms when it arrived. */
  at: number;
  /** What the fake answered. */
  response: { ok: boolean; error_code?: number; description?: string };
}

/** A scripted failure for the next call of a method. */
export interface TelegramFailure {
  error_code: number;
  description: string;
  parameters?: { retry_after?: number; migrate_to_chat_id?: number };
}

/** A fake Telegram Bot API on 127.0.0.1 for grammy: `POST /bot<token>/<method>` with JSON. */
export interface FakeTelegram {
  token: string;
  /** `http://127.0.0.1:<port>` (no trailing slash, as grammy wants). */
  apiRoot: string;
  bot: { id: number; is_bot: true; first_name: string; username: string };
  calls: TelegramCall[];
  /**
   * Long polls that overlapped another one (two consumers of one token): Telegram answers the older one
   * 409 "terminated by other getUpdates request", and so does the fake.
   */
  readonly conflicts: number;
  /** Queues an update for getUpdates; assigns the next `update_id` unless the update has one. */
  pushUpdate(update: Record<string, unknown>): number;
  /**
   * The next getUpdates is answered `{ ok: true, result }` with this result as it is (anything: a list of
   * malformed entries, null, a string), once; updates queued meanwhile wait for the call after.
   */
  pushRawResult(result: unknown): void;
  /** Delivers an update again even though its id was confirmed (a redelivery after a crash). */
  redeliver(update: Record<string, unknown> & { update_id: number }): void;
  /**
   * Called with each call's method and body; `true` cuts the connection without an answer (a reset before
   * the Bot API took the request: nothing is recorded, nothing is done).
   */
  resetConnection?: (method: string, body: Record<string, any>) => boolean;
  /** Connections cut by {@link resetConnection}. */
  readonly resets: number;
  /** The next call of `method` (optionally only those matching) fails with this answer. */
  failNext(method: string, failure: TelegramFailure, match?: (body: Record<string, unknown>) => boolean): void;
  /** Calls of one method. */
  callsOf(method: string): TelegramCall[];
  /** What each message the bot sent shows now, edits applied, by `<chat_id>:<message_id>` (HTML as sent). */
  readonly shown: Map<string, { text: string; parseMode?: string }>;
  /**
   * As Telegram's flood control: an `editMessageText` of a chat less than `minIntervalMs` after the last
   * one of that chat is answered 429 with `retry_after` (seconds). Off when undefined.
   */
  editLimit?: { minIntervalMs: number; retryAfter: number };
  /** Edits answered 429 by {@link editLimit}. */
  readonly editsLimited: number;
  /** Resolves with the first call (past or future) of `method` matching `match`; rejects after `timeoutMs`. */
  waitFor(method: string, match?: (call: TelegramCall) => boolean, timeoutMs?: number): Promise<TelegramCall>;
  /** Registers a file that `getFile` describes and `GET /file/bot<token>/<file_path>` serves; returns its file id. */
  addFile(file: FakeTelegramFile): string;
  /** Requests of `GET /file/bot<token>/…`, in order. */
  readonly downloads: TelegramDownload[];
  close(): Promise<void>;
}

/** A file the fake serves (SPEC §15 media tests). */
export interface FakeTelegramFile extends ServedFile {
  fileId?: string;
  /** `file_path` in getFile's answer (default `documents/file_<n>`). */
  path?: string;
  /** `file_size` getFile announces (default the real size); over 20 MB getFile answers "file is too big", as Telegram does. */
  announcedSize?: number;
  /** The download is answered with this status (and no file). */
  status?: number;
}

/** One file download the fake served (or refused). */
export interface TelegramDownload {
  path: string;
  /** The token in the URL was the bot's. */
  authorized: boolean;
  status: number;
  /** Bytes written before the download ended. */
  bytesSent: number;
  /** The client went away before the whole file was sent. */
  aborted: boolean;
}

/** One file part of a multipart upload, as a fake received it. */
export interface UploadedPart {
  field: string;
  filename?: string;
  contentType?: string;
  bytes: Buffer;
  size: number;
  sha256: string;
}

/**
 * A small multipart/form-data reader for the fakes (grammy writes `filename=` without quotes, which some
 * parsers refuse): the text fields, and the file parts with their bytes.
 */
export function parseMultipart(body: Buffer, contentType: string): { fields: Record<string, string>; files: UploadedPart[] } {
  const boundary = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  const fields: Record<string, string> = {};
  const files: UploadedPart[] = [];
  if (!boundary) return { fields, files };
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    const next = body.indexOf(delimiter, start);
    if (next < 0) break;
    const part = body.subarray(start + 2, next - 2); // CRLF after the delimiter, CRLF before the next one
    const split = part.indexOf('\r\n\r\n');
    const head = part.subarray(0, split).toString();
    const content = part.subarray(split + 4);
    const name = /name="([^"]*)"/i.exec(head)?.[1] ?? '';
    const filename = /filename\*?=(?:"([^"]*)"|([^;\r\n]+))/i.exec(head);
    const type = /content-type:\s*([^\r\n;]+)/i.exec(head)?.[1]?.trim();
    if (filename) {
      files.push({ field: name, filename: filename[1] ?? filename[2]?.trim(), ...(type ? { contentType: type } : {}), bytes: Buffer.from(content), size: content.length, sha256: createHash('sha256').update(content).digest('hex') });
    } else fields[name] = content.toString();
    at = next;
  }
  return { fields, files };
}

/** How a fake serves a file's bytes: all at once, slowly, or cut short. */
export interface ServedFile {
  bytes: Uint8Array;
  contentType?: string;
  /** Serve the bytes in chunks of this many bytes, waiting `chunkDelayMs` between them (a slow download). */
  chunkBytes?: number;
  chunkDelayMs?: number;
  /** Cut the connection after this many bytes (a download that breaks off). */
  cutAfterBytes?: number;
}

/** Writes a file as a 200 with its length, as `file` says (slow, cut); counts into `download` and notes an early close. */
export async function streamFile(req: IncomingMessage, res: ServerResponse, file: ServedFile, download: { bytesSent: number; aborted: boolean }): Promise<void> {
  res.once('close', () => { if (!res.writableFinished) download.aborted = true; });
  res.writeHead(200, { 'content-type': file.contentType ?? 'application/octet-stream', 'content-length': String(file.bytes.length) });
  const chunk = file.chunkBytes ?? file.bytes.length;
  for (let at = 0; at < file.bytes.length; at += chunk) {
    if (res.destroyed) return;
    const piece = file.bytes.subarray(at, Math.min(at + chunk, file.bytes.length));
    if (file.cutAfterBytes !== undefined && download.bytesSent + piece.length > file.cutAfterBytes) {
      const rest = Math.max(0, file.cutAfterBytes - download.bytesSent);
      if (rest > 0) res.write(piece.subarray(0, rest));
      download.bytesSent += rest;
      await new Promise((resolve) => setTimeout(resolve, 20));
      req.socket.destroy();
      return;
    }
    res.write(piece);
    download.bytesSent += piece.length;
    if (file.chunkDelayMs) await new Promise((resolve) => setTimeout(resolve, file.chunkDelayMs));
  }
  res.end();
}

/** Tags Telegram's HTML parse mode accepts. */
const ALLOWED_TAGS = new Set(['b', 'strong', 'i', 'em', 'u', 'ins', 's', 'strike', 'del', 'span', 'tg-spoiler', 'a', 'code', 'pre', 'blockquote', 'tg-emoji']);

/**
 * Parses text as Telegram's HTML parse mode does, strictly: only the allowed tags, properly nested, and
 * `&` only as an entity. Returns the visible text, or the error Telegram would answer.
 */
export function parseTelegramHtml(html: string): { text: string } | { error: string } {
  const stack: string[] = [];
  let text = '';
  let i = 0;
  while (i < html.length) {
    const ch = html[i]!;
    if (ch === '<') {
      const end = html.indexOf('>', i);
      const m = end < 0 ? null : /^<(\/?)([a-z][\w-]*)(\s[^>]*)?>$/i.exec(html.slice(i, end + 1));
      if (!m) return { error: `Bad Request: can't parse entities: Unexpected character "<" at byte offset ${i}` };
      const name = m[2]!.toLowerCase();
      if (!ALLOWED_TAGS.has(name)) return { error: `Bad Request: can't parse entities: Unsupported start tag "${name}" at byte offset ${i}` };
      if (m[1]) {
        if (stack.pop() !== name) return { error: `Bad Request: can't parse entities: Can't find end tag corresponding to start tag "${name}"` };
      } else stack.push(name);
      i = end + 1;
      continue;
    }
    if (ch === '>') return { error: `Bad Request: can't parse entities: Unexpected character ">" at byte offset ${i}` };
    if (ch === '&') {
      const m = /^&(lt|gt|amp|quot|#\d+|#x[0-9a-f]+);/i.exec(html.slice(i, i + 12));
      if (!m) return { error: `Bad Request: can't parse entities: Unsupported HTML entity at byte offset ${i}` };
      text += { lt: '<', gt: '>', amp: '&', quot: '"' }[m[1]!.toLowerCase()] ?? String.fromCodePoint(m[1]!.startsWith('#x') ? parseInt(m[1]!.slice(2), 16) : parseInt(m[1]!.slice(1), 10));
      i += m[0].length;
      continue;
    }
    text += ch;
    i++;
  }
  if (stack.length) return { error: `Bad Request: can't parse entities: Can't find end tag corresponding to start tag "${stack.at(-1)}"` };
  return { text };
}

export async function startFakeTelegram(options: { token?: string; maxPollMs?: number } = {}): Promise<FakeTelegram> {
  const token = options.token ?? '123456:TEST-token_abcdefghij';
  const maxPollMs = options.maxPollMs ?? 1000;
  const bot = { id: 9001, is_bot: true as const, first_name: 'Switchboard Test', username: 'switchboard_test_bot' };
  const queue: { update: Record<string, unknown> & { update_id: number }; forced: boolean }[] = [];
  const waiters: { offset: number; limit: number; reply: (updates: unknown) => void; conflict: () => void }[] = [];
  const rawResults: unknown[] = [];
  let conflicts = 0;
  let resets = 0;
  const failures: { method: string; failure: TelegramFailure; match?: (body: Record<string, unknown>) => boolean }[] = [];
  const listeners = new Set<() => void>();
  const calls: TelegramCall[] = [];
  let nextUpdateId = 1;
  let nextMessageId = 5000;
  const shown = new Map<string, { text: string; parseMode?: string }>();
  const lastEditAt = new Map<string, number>();
  let editsLimited = 0;
  const files = new Map<string, FakeTelegramFile & { fileId: string; path: string }>();
  const downloads: TelegramDownload[] = [];
  let nextFile = 1;

  const available = (offset: number, limit: number) => {
    const out = queue.filter((q) => q.forced || q.update.update_id >= offset).slice(0, limit);
    for (const q of out) if (q.forced) queue.splice(queue.indexOf(q), 1);
    return out.map((q) => q.update);
  };
  const flush = () => {
    while (rawResults.length && waiters.length) waiters.shift()!.reply(rawResults.shift());
    for (const w of [...waiters]) {
      const updates = available(w.offset, w.limit);
      if (updates.length) {
        waiters.splice(waiters.indexOf(w), 1);
        w.reply(updates);
      }
    }
  };
  const record = (call: TelegramCall) => {
    calls.push(call);
    for (const l of [...listeners]) l();
  };

  const handlers: Record<string, (body: Record<string, any>) => unknown> = {
    getMe: () => ({ ...bot, can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false, can_connect_to_business: false, has_main_web_app: false }),
    deleteWebhook: () => true,
    setWebhook: () => true,
    getWebhookInfo: () => ({ url: '', has_custom_certificate: false, pending_update_count: 0 }),
    setMyCommands: () => true,
    sendChatAction: () => true,
    setMessageReaction: () => true,
    sendPhoto: (b) => mediaMessage(b, 'photo'),
    sendDocument: (b) => mediaMessage(b, 'document'),
    sendMessage: (b) => ({
      message_id: remember(b, nextMessageId++), date: Math.floor(Date.now() / 1000), from: bot,
      chat: { id: Number(b.chat_id), type: Number(b.chat_id) < 0 ? 'supergroup' : 'private' }, text: b.text,
      ...(b.message_thread_id ? { message_thread_id: b.message_thread_id, is_topic_message: true } : {}),
    }),
  };

  /** The answer to sendPhoto/sendDocument (the file by URL or as uploaded). */
  function mediaMessage(b: Record<string, any>, kind: 'photo' | 'document'): Record<string, unknown> {
    const upload = (b.files as UploadedPart[] | undefined)?.[0];
    const file = { file_id: `sent-${nextFile++}`, file_unique_id: `u${nextFile}`, ...(upload ? { file_size: upload.size } : {}) };
    return {
      message_id: nextMessageId++, date: Math.floor(Date.now() / 1000), from: bot,
      chat: { id: Number(b.chat_id), type: Number(b.chat_id) < 0 ? 'supergroup' : 'private' },
      ...(kind === 'photo' ? { photo: [{ ...file, width: 1, height: 1 }] } : { document: { ...file, ...(upload?.filename ? { file_name: upload.filename } : {}) } }),
      ...(b.caption ? { caption: b.caption } : {}),
    };
  }

  /** Serves `GET /file/bot<token>/<path>` from the registered files. */
  async function serveFile(req: IncomingMessage, res: ServerResponse, urlToken: string, path: string): Promise<void> {
    const file = [...files.values()].find((f) => f.path === path);
    const download: TelegramDownload = { path, authorized: urlToken === token, status: 200, bytesSent: 0, aborted: false };
    downloads.push(download);
    for (const l of [...listeners]) l();
    const fail = (status: number) => {
      download.status = status;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, error_code: status, description: status === 404 ? 'Not Found' : 'Error' }));
    };
    if (!download.authorized) return fail(401);
    if (!file) return fail(404);
    if (file.status) return fail(file.status);
    await streamFile(req, res, file, download);
  }

  /** Keeps what a sent message shows; returns its id. */
  function remember(body: Record<string, any>, messageId: number): number {
    shown.set(`${body.chat_id}:${messageId}`, { text: String(body.text ?? ''), ...(body.parse_mode ? { parseMode: String(body.parse_mode) } : {}) });
    return messageId;
  }
  /** editMessageText as Telegram answers it: the message must exist, the text must change, HTML must parse. */
  function edit(body: Record<string, any>): { status: number; response: Record<string, unknown> } {
    const key = `${body.chat_id}:${body.message_id}`;
    const before = shown.get(key);
    const fail = (status: number, description: string, parameters?: Record<string, unknown>) => (
      { status, response: { ok: false, error_code: status, description, ...(parameters ? { parameters } : {}) } });
    if (!before) return fail(400, 'Bad Request: message to edit not found');
    const limit = fake.editLimit;
    const last = lastEditAt.get(String(body.chat_id));
    if (limit && last !== undefined && Date.now() - last < limit.minIntervalMs) {
      editsLimited++;
      return fail(429, `Too Many Requests: retry after ${limit.retryAfter}`, { retry_after: limit.retryAfter });
    }
    const text = String(body.text ?? '');
    if (body.parse_mode === 'HTML') {
      const parsed = parseTelegramHtml(text);
      if ('error' in parsed) return fail(400, parsed.error);
      if (parsed.text.length > 4096) return fail(400, 'Bad Request: MESSAGE_TOO_LONG');
      if (!parsed.text.trim()) return fail(400, 'Bad Request: message text is empty');
    }
    if (before.text === text && before.parseMode === body.parse_mode) {
      return fail(400, 'Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message');
    }
    lastEditAt.set(String(body.chat_id), Date.now());
    remember(body, Number(body.message_id));
    return { status: 200, response: { ok: true, result: { message_id: Number(body.message_id), date: Math.floor(Date.now() / 1000), edit_date: Math.floor(Date.now() / 1000), from: bot, chat: { id: Number(body.chat_id), type: Number(body.chat_id) < 0 ? 'supergroup' : 'private' }, text } } };
  }

  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const send = (status: number, payload: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(payload));
    };
    const pathname = new URL(req.url ?? '/', 'http://x').pathname;
    const download = /^\/file\/bot([^/]+)\/(.+)$/.exec(pathname);
    if (download && req.method === 'GET') return serveFile(req, res, decodeURIComponent(download[1]!), download[2]!.split('/').map(decodeURIComponent).join('/'));
    const m = /^\/bot([^/]+)\/(\w+)$/.exec(pathname);
    if (!m) return send(404, { ok: false, error_code: 404, description: 'Not Found' });
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    const method = m[2]!;
    const type = String(req.headers['content-type'] ?? '');
    let body: Record<string, any> = {};
    if (type.startsWith('multipart/form-data')) {
      // Uploads (InputFile): text fields as values (JSON ones parsed), the file parts under `files`.
      const form = parseMultipart(raw, type);
      for (const [key, value] of Object.entries(form.fields)) body[key] = /^[[{]/.test(value) ? JSON.parse(value) : /^-?\d+$/.test(value) ? Number(value) : value;
      body.files = form.files;
    } else if (raw.length) body = JSON.parse(raw.toString()) as Record<string, any>;
    if (fake.resetConnection?.(method, body)) {
      resets++;
      req.socket.destroy();
      return;
    }
    if (decodeURIComponent(m[1]!) !== token) {
      const response = { ok: false, error_code: 401, description: 'Unauthorized' };
      record({ method, body, at: Date.now(), response });
      return send(401, response);
    }
    const failure = failures.find((f) => f.method === method && (!f.match || f.match(body)));
    if (failure) {
      failures.splice(failures.indexOf(failure), 1);
      const response = { ok: false, ...failure.failure };
      record({ method, body, at: Date.now(), response });
      return send(failure.failure.error_code, response);
    }
    if (method === 'getUpdates') {
      record({ method, body, at: Date.now(), response: { ok: true } });
      const offset = Number(body.offset ?? 0);
      const limit = Number(body.limit ?? 100);
      if (body.timeout) {
        for (const older of waiters.splice(0)) {
          conflicts++;
          older.conflict();
        }
      }
      if (offset) for (let i = queue.length - 1; i >= 0; i--) if (!queue[i]!.forced && queue[i]!.update.update_id < offset) queue.splice(i, 1);
      if (rawResults.length) return send(200, { ok: true, result: rawResults.shift() });
      const updates = available(offset, limit);
      if (updates.length || !body.timeout) return send(200, { ok: true, result: updates });
      const waiter = {
        offset, limit,
        reply: (result: unknown) => { clearTimeout(timer); send(200, { ok: true, result }); },
        conflict: () => {
          clearTimeout(timer);
          send(409, { ok: false, error_code: 409, description: 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running' });
        },
      };
      const timer = setTimeout(() => { waiters.splice(waiters.indexOf(waiter), 1); send(200, { ok: true, result: [] }); }, Math.min(Number(body.timeout) * 1000, maxPollMs));
      req.socket.once('close', () => {
        const at = waiters.indexOf(waiter);
        if (at >= 0) { waiters.splice(at, 1); clearTimeout(timer); }
      });
      res.once('close', () => {
        const at = waiters.indexOf(waiter);
        if (at >= 0) { waiters.splice(at, 1); clearTimeout(timer); }
      });
      waiters.push(waiter);
      return;
    }
    if (method === 'editMessageText') {
      const { status, response } = edit(body);
      record({ method, body, at: Date.now(), response: response as TelegramCall['response'] });
      return send(status, response);
    }
    if (method === 'sendMessage' && body.parse_mode === 'HTML') {
      const parsed = parseTelegramHtml(String(body.text ?? ''));
      const error = 'error' in parsed ? parsed.error : parsed.text.length > 4096 ? 'Bad Request: message is too long' : !parsed.text.trim() ? 'Bad Request: message text is empty' : undefined;
      if (error) {
        const response = { ok: false, error_code: 400, description: error };
        record({ method, body, at: Date.now(), response });
        return send(400, response);
      }
    }
    // Plain text (HTML was measured after parsing above, as Telegram does).
    if (method === 'sendMessage' && body.parse_mode !== 'HTML' && (String(body.text ?? '').length > 4096 || !String(body.text ?? '').trim())) {
      const response = { ok: false, error_code: 400, description: body.text ? 'Bad Request: message is too long' : 'Bad Request: message text is empty' };
      record({ method, body, at: Date.now(), response });
      return send(400, response);
    }
    if (method === 'getFile') {
      const file = files.get(String(body.file_id));
      const size = file?.announcedSize ?? file?.bytes.length ?? 0;
      const error = !file ? 'Bad Request: invalid file_id' : size > 20 * 1024 * 1024 ? 'Bad Request: file is too big' : undefined;
      const response = error ? { ok: false, error_code: 400, description: error } : { ok: true };
      record({ method, body, at: Date.now(), response });
      if (error) return send(400, response);
      return send(200, { ok: true, result: { file_id: file!.fileId, file_unique_id: `u-${file!.fileId}`, file_size: size, file_path: file!.path } });
    }
    const handler = handlers[method];
    const response = handler ? { ok: true } : { ok: false, error_code: 404, description: 'Not Found: method not found' };
    record({ method, body, at: Date.now(), response });
    if (!handler) return send(404, response);
    return send(200, { ok: true, result: handler(body) });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  const fake: FakeTelegram = {
    token,
    apiRoot: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bot,
    calls,
    get conflicts() { return conflicts; },
    get resets() { return resets; },
    shown,
    get editsLimited() { return editsLimited; },
    pushUpdate(update) {
      const update_id = typeof update.update_id === 'number' ? update.update_id : nextUpdateId++;
      nextUpdateId = Math.max(nextUpdateId, update_id + 1);
      queue.push({ update: { ...update, update_id }, forced: false });
      flush();
      return update_id;
    },
    pushRawResult(result) {
      rawResults.push(result);
      flush();
    },
    redeliver(update) {
      queue.push({ update, forced: true });
      flush();
    },
    failNext(method, failure, match) {
      failures.push({ method, failure, match });
    },
    callsOf: (method) => calls.filter((c) => c.method === method),
    downloads,
    addFile(file) {
      const n = nextFile++;
      const fileId = file.fileId ?? `file-${n}`;
      files.set(fileId, { ...file, fileId, path: file.path ?? `documents/file_${n}` });
      return fileId;
    },
    waitFor(method, match = () => true, timeoutMs = 5000) {
      const find = () => calls.find((c) => c.method === method && match(c));
      const found = find();
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const listener = () => {
          const call = find();
          if (!call) return;
          listeners.delete(listener);
          clearTimeout(timer);
          resolve(call);
        };
        const timer = setTimeout(() => {
          listeners.delete(listener);
          reject(new Error(`fake Telegram: no ${method} call matched within ${timeoutMs} ms (calls: ${calls.map((c) => c.method).join(', ')})`));
        }, timeoutMs);
        listeners.add(listener);
      });
    },
    close: () => new Promise<void>((resolve) => {
      for (const w of waiters.splice(0)) w.reply([]);
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  return fake;
}
