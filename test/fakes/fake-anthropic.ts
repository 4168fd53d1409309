import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';

/** A content block as the fake received it (`cache_control` included). */
export type WireBlock = { type: string; cache_control?: { type: string }; [key: string]: unknown };

/** One `POST /v1/messages` the fake received. */
export interface RecordedAnthropicRequest {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body as sent. */
  body: {
    model: string;
    max_tokens: number;
    system?: string | WireBlock[];
    messages: { role: string; content: string | WireBlock[] }[];
    tools?: { name: string; description?: string; input_schema: unknown; cache_control?: unknown }[];
    stream?: boolean;
    [key: string]: unknown;
  };
  /** The raw JSON text, for byte comparisons. */
  raw: string;
  /** What the simulated prompt cache made of it (undefined when the request was refused before). */
  cache?: CacheOutcome;
}

/** The simulated prompt cache's accounting of one request, in tokens. */
export interface CacheOutcome {
  /** Not read from nor written to the cache (Anthropic's `input_tokens`). */
  input: number;
  read: number;
  write: number;
  /** Indices (in cache order: tools, system blocks, message blocks) of the blocks with `cache_control`. */
  breakpoints: number[];
}

/** What the fake answers to one request. */
export interface AnthropicFakeReply {
  content?: string;
  /** `input` is sent as the tool_use input; `arguments` (raw JSON text, possibly broken) is streamed as it is. */
  toolCalls?: { id: string; name: string; input?: unknown; arguments?: string }[];
  /** A thinking block before the answer (plain: a `thinking` block; streams: thinking_delta + signature_delta). */
  thinking?: string;
  /** Add a `redacted_thinking` block before the answer. */
  redactedThinking?: boolean;
  /** Default: `tool_use` with tool calls, else `end_turn`. */
  stopReason?: string;
  /** Replaces figures of the computed usage; `null` = report none (plain answers only). */
  usage?: Partial<{ input_tokens: number; output_tokens: number; cache_read_input_tokens: number; cache_creation_input_tokens: number }> | null;
  /** The answer's `model`; default the request's. */
  model?: string;
  /** Answer with this HTTP error instead (`error.type`, e.g. rate_limit_error, overloaded_error). */
  status?: number;
  error?: { type: string; message: string };
  /** Extra response headers; errors get `retry-after-ms: 1` unless given (keeps the SDK's retries quick). */
  headers?: Record<string, string>;
  /** Wait this long before answering (ms); the request's abort ends it early. */
  delayMs?: number;
  /** Streaming only: send this `error` event after the first text delta (or after message_start with no text), then end. */
  streamError?: { type: string; message: string };
  /** Streaming only: each tool input arrives in `input_json_delta` pieces of this many characters (default 8). */
  splitArguments?: number;
  /** Streaming only: wait this long before each text piece (ms). */
  chunkDelayMs?: number;
}

/** A fake Anthropic Messages API on 127.0.0.1, with a simulated prompt cache. */
export interface FakeAnthropic {
  /** For the SDK's `baseURL` (it adds `/v1/...`). */
  baseURL: string;
  requests: RecordedAnthropicRequest[];
  /** Replies used in order; when empty, `fallback` answers. */
  script: AnthropicFakeReply[];
  fallback: (request: RecordedAnthropicRequest) => AnthropicFakeReply | Promise<AnthropicFakeReply>;
  /** When set, a request without this key (`x-api-key` or bearer) gets 401 `authentication_error`. */
  apiKey?: string;
  /** `GET /v1/models`. */
  models: string[];
  /** Smallest prefix written to the cache (Anthropic: 1024 for most models) and how far back a breakpoint looks (20 blocks). */
  cacheOptions: { minTokens: number; lookback: number; imageTokens: number };
  /** Totals over the answered requests, as reported in usage. */
  stats: { requests: number; inputTokens: number; cacheReadTokens: number; cacheWriteTokens: number; outputTokens: number };
  /** Forget every cached prefix and zero the stats. */
  resetCache(): void;
  close(): Promise<void>;
}

export async function startFakeAnthropic(fallback?: FakeAnthropic['fallback']): Promise<FakeAnthropic> {
  const cached = new Map<string, number>();
  const fake: FakeAnthropic = {
    baseURL: '',
    requests: [],
    script: [],
    fallback: fallback ?? ((r) => ({ content: `echo: ${lastUserText(r)}` })),
    models: ['claude-test-1', 'claude-test-2'],
    cacheOptions: { minTokens: 1024, lookback: 20, imageTokens: 1600 },
    stats: { requests: 0, inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 0 },
    resetCache: () => {
      cached.clear();
      fake.stats = { requests: 0, inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 0 };
    },
    close: async () => undefined,
  };
  let n = 0;
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const fail = (status: number, type: string, message: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_${n}`, 'retry-after-ms': '1', ...headers });
      res.end(JSON.stringify({ type: 'error', error: { type, message } }));
    };
    if (fake.apiKey !== undefined) {
      const given = req.headers['x-api-key'] ?? String(req.headers.authorization ?? '').replace(/^Bearer /, '');
      if (given !== fake.apiKey) return fail(401, 'authentication_error', 'invalid x-api-key');
    }
    if (req.method === 'GET' && path === '/v1/models') {
      const data = fake.models.map((id) => ({ type: 'model', id, display_name: id, created_at: '2026-01-01T00:00:00Z' }));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data, has_more: false, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null }));
      return;
    }
    if (req.method !== 'POST' || path !== '/v1/messages') return fail(404, 'not_found_error', `no route ${req.method} ${path}`);
    let body: RecordedAnthropicRequest['body'];
    try {
      body = JSON.parse(raw) as RecordedAnthropicRequest['body'];
    } catch {
      return fail(400, 'invalid_request_error', 'the body is not JSON');
    }
    const recorded: RecordedAnthropicRequest = { path, headers: req.headers, body, raw };
    fake.requests.push(recorded);
    const invalid = validate(body);
    if (invalid) return fail(400, 'invalid_request_error', invalid);
    const reply = fake.script.shift() ?? await fake.fallback(recorded);
    if (reply.delayMs) {
      const closed = await new Promise<boolean>((resolve) => {
        const t = setTimeout(() => resolve(false), reply.delayMs);
        res.once('close', () => { clearTimeout(t); resolve(true); });
      });
      if (closed) return;
    }
    if (reply.status && reply.status >= 400) {
      return fail(reply.status, reply.error?.type ?? 'api_error', reply.error?.message ?? 'error', reply.headers);
    }
    const cache = simulateCache(body, cached, fake.cacheOptions);
    recorded.cache = cache;
    const id = `msg_${++n}`;
    const model = reply.model ?? body.model;
    const content = reply.content ?? '';
    const calls = (reply.toolCalls ?? []).map((c) => ({ id: c.id, name: c.name, input: c.input ?? safeParse(c.arguments), json: c.arguments ?? JSON.stringify(c.input ?? {}) }));
    const stopReason = reply.stopReason ?? (calls.length ? 'tool_use' : 'end_turn');
    const outputTokens = countTokens(content) + countTokens(reply.thinking ?? '') + calls.reduce((a, c) => a + countTokens(c.name + c.json), 0);
    const usage = { input_tokens: cache.input, cache_creation_input_tokens: cache.write, cache_read_input_tokens: cache.read, output_tokens: outputTokens, ...reply.usage };
    if (reply.usage !== null) {
      fake.stats.requests++;
      fake.stats.inputTokens += usage.input_tokens;
      fake.stats.cacheReadTokens += usage.cache_read_input_tokens;
      fake.stats.cacheWriteTokens += usage.cache_creation_input_tokens;
      fake.stats.outputTokens += usage.output_tokens;
    }
    if (!body.stream) {
      const blocks: unknown[] = [];
      if (reply.thinking) blocks.push({ type: 'thinking', thinking: reply.thinking, signature: 'sig-fake' });
      if (reply.redactedThinking) blocks.push({ type: 'redacted_thinking', data: 'cmVkYWN0ZWQ=' });
      if (content) blocks.push({ type: 'text', text: content, citations: null });
      for (const c of calls) blocks.push({ type: 'tool_use', id: c.id, name: c.name, input: c.input });
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${n}`, ...reply.headers });
      res.end(JSON.stringify({
        id, type: 'message', role: 'assistant', model, content: blocks, stop_reason: stopReason, stop_sequence: null,
        ...(reply.usage === null ? {} : { usage }),
      }));
      return;
    }
    await stream(res, reply, { id, model, content, calls, stopReason, usage });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return fake;
}

/** Writes a streamed answer with the Messages API's event sequence. */
async function stream(
  res: ServerResponse, reply: AnthropicFakeReply,
  m: { id: string; model: string; content: string; calls: { id: string; name: string; json: string }[]; stopReason: string; usage: Record<string, number> },
): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', ...reply.headers });
  let gone = false;
  res.once('close', () => { gone = true; });
  const send = (event: string, data: Record<string, unknown>) => res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
  const { output_tokens: outputTokens, ...inputSide } = m.usage;
  send('message_start', { message: { id: m.id, type: 'message', role: 'assistant', model: m.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...inputSide, output_tokens: 1 } } });
  send('ping', {});
  const failed = () => {
    if (!reply.streamError) return false;
    send('error', { error: reply.streamError });
    res.end();
    return true;
  };
  let index = 0;
  if (reply.thinking) {
    send('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
    for (const piece of pieces(reply.thinking)) send('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: piece } });
    send('content_block_delta', { index, delta: { type: 'signature_delta', signature: 'sig-fake' } });
    send('content_block_stop', { index: index++ });
  }
  if (reply.redactedThinking) {
    send('content_block_start', { index, content_block: { type: 'redacted_thinking', data: 'cmVkYWN0ZWQ=' } });
    send('content_block_stop', { index: index++ });
  }
  if (m.content) {
    send('content_block_start', { index, content_block: { type: 'text', text: '', citations: null } });
    for (const piece of pieces(m.content)) {
      if (reply.chunkDelayMs) await new Promise((resolve) => setTimeout(resolve, reply.chunkDelayMs));
      if (gone) return;
      send('content_block_delta', { index, delta: { type: 'text_delta', text: piece } });
      if (failed()) return;
    }
    send('content_block_stop', { index: index++ });
  } else if (failed()) return;
  const size = reply.splitArguments ?? 8;
  for (const c of m.calls) {
    send('content_block_start', { index, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } });
    send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: '' } });
    for (let at = 0; at < c.json.length; at += size) send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: c.json.slice(at, at + size) } });
    send('content_block_stop', { index: index++ });
  }
  send('message_delta', { delta: { stop_reason: m.stopReason, stop_sequence: null }, usage: { output_tokens: outputTokens } });
  send('message_stop', {});
  res.end();
}

/**
 * Anthropic's prompt cache, simulated. The prompt is a list of blocks in cache order (tools, system blocks, message
 * blocks), each keyed by its place and its JSON without `cache_control`; a prefix is the hash chain up to a block.
 * A request reads the longest prefix an earlier request wrote that ends at one of its blocks at most `lookback`
 * blocks before one of its breakpoints, and writes the prefix of each breakpoint of at least `minTokens` tokens.
 */
function simulateCache(body: RecordedAnthropicRequest['body'], cached: Map<string, number>, options: FakeAnthropic['cacheOptions']): CacheOutcome {
  const blocks: { key: string; tokens: number; breakpoint: boolean }[] = [];
  const add = (place: string, block: Record<string, unknown>) => {
    const { cache_control: control, ...rest } = block;
    blocks.push({ key: `${place}|${JSON.stringify(rest)}`, tokens: tokensOf(rest, options.imageTokens), breakpoint: control !== undefined && control !== null });
  };
  for (const tool of body.tools ?? []) add('tool', tool);
  const system = typeof body.system === 'string' ? [{ type: 'text', text: body.system }] : body.system ?? [];
  for (const block of system) add('system', block);
  body.messages.forEach((message, i) => {
    const content = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
    for (const block of content) add(`${i}:${message.role}`, block);
  });
  let hash = createHash('sha256').update(body.model).digest('hex');
  let sum = 0;
  const hashes: string[] = [];
  const totals: number[] = [];
  for (const block of blocks) {
    hash = createHash('sha256').update(hash).update(block.key).digest('hex');
    sum += block.tokens;
    hashes.push(hash);
    totals.push(sum);
  }
  const breakpoints = blocks.flatMap((b, i) => (b.breakpoint ? [i] : []));
  let readEnd = -1;
  for (const p of breakpoints) {
    for (let j = p; j >= 0 && j > p - options.lookback; j--) {
      if (cached.has(hashes[j]!)) {
        readEnd = Math.max(readEnd, j);
        break;
      }
    }
  }
  let writeEnd = -1;
  for (const p of breakpoints) {
    if (totals[p]! < options.minTokens) continue;
    writeEnd = Math.max(writeEnd, p);
    cached.set(hashes[p]!, totals[p]!);
  }
  const read = readEnd >= 0 ? totals[readEnd]! : 0;
  const write = writeEnd > readEnd ? totals[writeEnd]! - read : 0;
  return { input: sum - read - write, read, write, breakpoints };
}

function tokensOf(block: Record<string, unknown>, imageTokens: number): number {
  switch (block.type) {
    case 'text': return countTokens(String(block.text));
    case 'image': return imageTokens;
    case 'tool_use': return countTokens(`${String(block.name)}${JSON.stringify(block.input)}`);
    case 'tool_result': return countTokens(typeof block.content === 'string' ? block.content : JSON.stringify(block.content ?? ''));
    default: return countTokens(JSON.stringify(block));
  }
}

/** The refusals of the real API that a wrong request body would meet, as its 400 messages. */
function validate(body: RecordedAnthropicRequest['body']): string | undefined {
  if (typeof body.max_tokens !== 'number') return 'max_tokens: Field required';
  if (!Array.isArray(body.messages) || !body.messages.length) return 'messages: at least one message is required';
  const all: WireBlock[] = [...(typeof body.system === 'string' ? [] : body.system ?? [])];
  let marks = (body.tools ?? []).filter((t) => t.cache_control).length;
  for (const [i, m] of body.messages.entries()) {
    if (m.role !== 'user' && m.role !== 'assistant') return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    if (typeof m.content === 'string') {
      if (!m.content.trim()) return `messages.${i}: text content blocks must contain non-whitespace text`;
      continue;
    }
    if (!m.content.length) return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`;
    all.push(...m.content);
    const uses = m.role === 'assistant' ? m.content.filter((b) => b.type === 'tool_use') : [];
    for (const use of uses) if (!use.input || typeof use.input !== 'object' || Array.isArray(use.input)) return `messages.${i}: tool_use.input: Input should be a valid dictionary`;
    const next = body.messages[i + 1];
    const results = next && typeof next.content !== 'string' ? next.content.filter((b) => b.type === 'tool_result').map((b) => b.tool_use_id) : [];
    const missing = uses.find((u) => !results.includes(u.id));
    if (missing) return `messages.${i + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${String(missing.id)}`;
    if (m.role === 'user') {
      const previous = body.messages[i - 1];
      const ids = previous && typeof previous.content !== 'string' ? previous.content.filter((b) => b.type === 'tool_use').map((b) => b.id) : [];
      const results = m.content.filter((b) => b.type === 'tool_result');
      const stray = results.find((b) => !ids.includes(b.tool_use_id));
      if (stray) return `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(stray.tool_use_id)}`;
      const firstOther = m.content.findIndex((b) => b.type !== 'tool_result');
      if (firstOther >= 0 && m.content.slice(firstOther).some((b) => b.type === 'tool_result')) {
        return `messages.${i}: tool_result blocks must come first in the user message`;
      }
    }
  }
  for (const block of all) {
    if (block.type === 'text' && !(typeof block.text === 'string' ? block.text : '').trim()) return 'text content blocks must contain non-whitespace text';
    if (block.cache_control) marks++;
  }
  if (marks > 4) return `A maximum of 4 blocks with cache_control may be provided. Found ${marks}.`;
  return undefined;
}

function pieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

function safeParse(json: string | undefined): unknown {
  try {
    return json === undefined ? {} : JSON.parse(json);
  } catch {
    return {};
  }
}

/** The text of the last user message of a request (its text blocks joined by newlines). */
export function lastUserText(request: RecordedAnthropicRequest): string {
  const users = request.body.messages.filter((m) => m.role === 'user');
  const content = users[users.length - 1]?.content;
  if (typeof content === 'string') return content;
  return (content ?? []).filter((b) => b.type === 'text').map((b) => String(b.text)).join('\n');
}

/** Every block of a request with `cache_control`, as `system.<i>` / `messages.<i>.<j>` / `tools.<i>`. */
export function breakpointsOf(request: RecordedAnthropicRequest): string[] {
  const marks: string[] = [];
  request.body.tools?.forEach((t, i) => { if (t.cache_control) marks.push(`tools.${i}`); });
  if (Array.isArray(request.body.system)) request.body.system.forEach((b, i) => { if (b.cache_control) marks.push(`system.${i}`); });
  request.body.messages.forEach((m, i) => {
    if (Array.isArray(m.content)) m.content.forEach((b, j) => { if (b.cache_control) marks.push(`messages.${i}.${j}`); });
  });
  return marks;
}
