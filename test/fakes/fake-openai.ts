import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An `image_url` part of a request's message, as the fake received it. */
export interface RecordedImage {
  /** Index of its message in `body.messages`. */
  message: number;
  /** Index of the part in that message's content parts. */
  part: number;
  url: string;
  /** A data URL's mime type (`data:<mime>;base64,…`); undefined for other URLs. */
  mime?: string;
  /** A data URL's decoded size in bytes; undefined for other URLs. */
  size?: number;
}

/** One request the fake received. */
export interface RecordedRequest {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /**
   * The parsed JSON body as sent. A user message with images has content parts on the wire
   * (`[{ type: 'text', … }, { type: 'image_url', … }]`) where the type says string: read its text with
   * {@link userText} and its images in {@link RecordedRequest.images}.
   */
  body: {
    model: string;
    messages: { role: string; content: string | null; name?: string; tool_calls?: unknown[]; tool_call_id?: string }[];
    stream?: boolean;
    stream_options?: { include_usage?: boolean };
    tools?: unknown[];
    [key: string]: unknown;
  };
  /** The raw JSON text, for byte comparisons. */
  raw: string;
  /** Every `image_url` part of the request's messages, in order. */
  images: RecordedImage[];
}

/** What the fake answers to one request. */
export interface FakeReply {
  content?: string;
  toolCalls?: { id: string; name: string; arguments: string }[];
  /** `null` = report no usage at all. */
  usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | null;
  /** Answer with this HTTP error instead. */
  status?: number;
  error?: { message: string; type?: string; code?: string };
  headers?: Record<string, string>;
  /** Wait this long before answering (ms); the request's abort ends it early. */
  delayMs?: number;
  /**
   * Streaming only: each tool call's arguments arrive in pieces of this many characters, each its own chunk after
   * one chunk with the call's id and name (as OpenAI streams them), the calls one after another.
   */
  splitArguments?: number;
  /** Streaming only: wait this long before each piece of the content (ms), as a model producing tokens at a pace. */
  chunkDelayMs?: number;
}

/** One `POST /v1/audio/transcriptions` the fake received (multipart). */
export interface RecordedTranscription {
  headers: Record<string, string | string[] | undefined>;
  model: string;
  file: { name: string; mime: string; size: number; data: Buffer };
  /** Every text field of the form (`model`, `response_format`, `language`, …). */
  fields: Record<string, string>;
}

/** What the fake answers to one transcription. */
export interface FakeTranscriptionReply {
  text?: string;
  /** Answer with this HTTP error instead. */
  status?: number;
  error?: { message: string; type?: string; code?: string };
  headers?: Record<string, string>;
  /** Hold the answer until this settles (or the client goes away), e.g. a promise the test resolves. */
  until?: Promise<unknown>;
}

/** A fake OpenAI-compatible server on 127.0.0.1: records every request; replies from a script or a function. */
export interface FakeOpenAI {
  baseURL: string;
  /** Chat completion requests (transcriptions are in {@link FakeOpenAI.transcriptions}). */
  requests: RecordedRequest[];
  /** Replies used in order; when empty, `fallback` answers. */
  script: FakeReply[];
  /** May answer later (a promise), to hold a request open until the test lets it go. */
  fallback: (request: RecordedRequest) => FakeReply | Promise<FakeReply>;
  /** Transcription requests, in order, each recorded before it is answered. */
  transcriptions: RecordedTranscription[];
  /** Transcription replies used in order; when empty, `transcriptionFallback` answers. */
  transcriptionScript: FakeTranscriptionReply[];
  /** Default: `{ text: 'transcript of <file name>' }`. */
  transcriptionFallback: (request: RecordedTranscription) => FakeTranscriptionReply | Promise<FakeTranscriptionReply>;
  close(): Promise<void>;
}

export async function startFakeOpenAI(fallback?: (request: RecordedRequest) => FakeReply | Promise<FakeReply>): Promise<FakeOpenAI> {
  const fake: FakeOpenAI = {
    baseURL: '',
    requests: [],
    script: [],
    fallback: fallback ?? ((r) => ({ content: `echo: ${lastUser(r)}` })),
    transcriptions: [],
    transcriptionScript: [],
    transcriptionFallback: (t) => ({ text: `transcript of ${t.file.name}` }),
    close: async () => undefined,
  };
  let n = 0;
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const bytes = Buffer.concat(chunks);
    const raw = bytes.toString('utf8');
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (req.method === 'GET' && path === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-test', object: 'model', owned_by: 'fake' }] }));
      return;
    }
    if (req.method === 'POST' && path === '/v1/audio/transcriptions') {
      await transcribe(fake, req, bytes, res);
      return;
    }
    if (req.method !== 'POST' || path !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }));
      return;
    }
    const body = JSON.parse(raw) as RecordedRequest['body'];
    const recorded: RecordedRequest = { path, headers: req.headers, body, raw, images: imagesOf(body.messages) };
    fake.requests.push(recorded);
    const reply = fake.script.shift() ?? await fake.fallback(recorded);
    if (reply.delayMs) {
      const closed = await new Promise<boolean>((resolve) => {
        const t = setTimeout(() => resolve(false), reply.delayMs);
        res.once('close', () => { clearTimeout(t); resolve(true); });
      });
      if (closed) return;
    }
    if (reply.status && reply.status >= 400) {
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
      res.end(JSON.stringify({ error: { type: 'invalid_request_error', message: 'error', ...reply.error } }));
      return;
    }
    const id = `chatcmpl-${++n}`;
    const created = Math.floor(Date.now() / 1000);
    const model = recorded.body.model;
    const content = reply.content ?? '';
    const usage = reply.usage === null ? undefined : reply.usage ?? { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
    const toolCalls = reply.toolCalls?.map((c, index) => ({ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
    if (!recorded.body.stream) {
      res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': `req_${n}`, ...reply.headers });
      res.end(JSON.stringify({
        id, object: 'chat.completion', created, model,
        choices: [{ index: 0, message: { role: 'assistant', content: toolCalls ? (content || null) : content, refusal: null, ...(toolCalls ? { tool_calls: toolCalls.map(({ index: _i, ...c }) => c) } : {}) }, finish_reason: toolCalls ? 'tool_calls' : 'stop', logprobs: null }],
        ...(usage ? { usage: { total_tokens: usage.prompt_tokens + usage.completion_tokens, ...usage } } : {}),
      }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', ...reply.headers });
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices, ...extra })}\n\n`);
    chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
    let gone = false;
    res.once('close', () => { gone = true; });
    for (const piece of content.match(/\S+\s*|\s+/g) ?? []) {
      if (reply.chunkDelayMs) await new Promise((resolve) => setTimeout(resolve, reply.chunkDelayMs));
      if (gone) return;
      chunk([{ index: 0, delta: { content: piece }, finish_reason: null }]);
    }
    if (toolCalls && reply.splitArguments) {
      const size = reply.splitArguments;
      for (const c of toolCalls) {
        chunk([{ index: 0, delta: { tool_calls: [{ index: c.index, id: c.id, type: 'function', function: { name: c.function.name, arguments: '' } }] }, finish_reason: null }]);
        for (let at = 0; at < c.function.arguments.length; at += size) {
          chunk([{ index: 0, delta: { tool_calls: [{ index: c.index, function: { arguments: c.function.arguments.slice(at, at + size) } }] }, finish_reason: null }]);
        }
      }
    } else if (toolCalls) chunk([{ index: 0, delta: { tool_calls: toolCalls }, finish_reason: null }]);
    chunk([{ index: 0, delta: {}, finish_reason: toolCalls ? 'tool_calls' : 'stop' }]);
    if (recorded.body.stream_options?.include_usage && usage) chunk([], { usage: { total_tokens: usage.prompt_tokens + usage.completion_tokens, ...usage } });
    res.end('data: [DONE]\n\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return fake;
}

async function transcribe(fake: FakeOpenAI, req: IncomingMessage, bytes: Buffer, res: ServerResponse): Promise<void> {
  const fail = (status: number, message: string) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { type: 'invalid_request_error', message } }));
  };
  let form: FormData;
  try {
    form = await new Request('http://x/', { method: 'POST', headers: { 'content-type': String(req.headers['content-type'] ?? '') }, body: new Uint8Array(bytes) }).formData();
  } catch (error) {
    fail(400, `not a multipart form: ${(error as Error).message}`);
    return;
  }
  const fields: Record<string, string> = {};
  let file: RecordedTranscription['file'] | undefined;
  for (const [name, value] of form.entries()) {
    if (typeof value === 'string') fields[name] = value;
    else if (name === 'file') file = { name: value.name, mime: value.type, size: value.size, data: Buffer.from(await value.arrayBuffer()) };
  }
  if (!file || !fields.model) {
    fail(400, 'a transcription needs a file and a model');
    return;
  }
  const recorded: RecordedTranscription = { headers: req.headers, model: fields.model, file, fields };
  fake.transcriptions.push(recorded);
  const reply = fake.transcriptionScript.shift() ?? await fake.transcriptionFallback(recorded);
  if (reply.until) {
    const gone = await new Promise<boolean>((resolve) => {
      res.once('close', () => resolve(true));
      void Promise.resolve(reply.until).then(() => resolve(false), () => resolve(false));
    });
    if (gone || res.destroyed) return;
  }
  if (reply.status && reply.status >= 400) {
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
    res.end(JSON.stringify({ error: { type: 'invalid_request_error', message: 'error', ...reply.error } }));
    return;
  }
  const text = reply.text ?? '';
  if (fields.response_format === 'text') {
    res.writeHead(200, { 'content-type': 'text/plain', ...reply.headers });
    res.end(text);
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json', ...reply.headers });
  res.end(JSON.stringify({ text }));
}

/** The `image_url` parts of a request's messages, with a data URL's mime and decoded size. */
function imagesOf(messages: readonly { content: unknown }[]): RecordedImage[] {
  const images: RecordedImage[] = [];
  messages.forEach((m, message) => {
    if (!Array.isArray(m.content)) return;
    (m.content as { type?: string; image_url?: { url?: string } }[]).forEach((p, part) => {
      if (p.type !== 'image_url' || typeof p.image_url?.url !== 'string') return;
      const url = p.image_url.url;
      const data = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s.exec(url);
      images.push(data ? { message, part, url, mime: data[1], size: Buffer.from(data[2] ?? '', 'base64').length } : { message, part, url });
    });
  });
  return images;
}

/** The text of a message's content: the string itself, or its `text` parts joined by newlines (a message with images). */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as { type?: string; text?: string }[]).filter((p) => p.type === 'text').map((p) => p.text ?? '').join('\n');
}

/** What the person wrote: a user message's content without the `[Runtime] <time>` line the gateway puts first. */
export function userText(content: string | null | undefined): string {
  return textOf(content).replace(/^\[Runtime\][^\n]*\n/, '');
}

/** Text of the last user message of a request, without its runtime line. */
export function lastUser(request: RecordedRequest): string {
  const users = request.body.messages.filter((m) => m.role === 'user');
  return userText(users[users.length - 1]?.content);
}

/** The conversation of a request as the people and the agent wrote it: no system message, no runtime lines. */
export function conversation(request: RecordedRequest): string[] {
  return request.body.messages.filter((m) => m.role !== 'system').map((m) => (m.role === 'user' ? userText(m.content) : m.content ?? ''));
}
