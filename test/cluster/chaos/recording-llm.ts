import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { userText } from '../../fakes/fake-openai.ts';

/** One chat completion call as the fake saw it. */
export interface LlmCall {
  /** The replica that made it: each replica uses its own API key, `sk-<replica>`. */
  replica: string;
  /** The last user message (without its runtime line): the chaos driver's `c<chat> m<i>`. */
  text: string;
  /** The correlation id header of the turn. */
  correlationId: string;
  /** Epoch ms when the request was read. */
  start: number;
  /** Epoch ms when the answer was written or the client went away. */
  end: number;
  /** The client closed the connection before the answer (killed, stopped, or aborted). */
  aborted: boolean;
  /** `image_url` parts in the last user message (SPEC §15: an image reaches the model in the caption's message). */
  images: number;
  /** What {@link LlmResponder} said the call was (a goal round, a job run); absent for the chat messages. */
  tag?: string;
}

/** One message of a request, as the fake reads it. */
export type LlmMessage = { role: string; content: string | null | { type: string; text?: string }[]; tool_calls?: { id: string }[] };

/** A scripted answer: text, or one tool call; `tag` is kept on the call. */
export type LlmReply = ({ content: string } | { toolCall: { id: string; name: string; arguments: string } }) & { tag?: string };

/** Chooses the answer of a request; undefined: the default `re: <last user text>`. */
export type LlmResponder = (request: { messages: LlmMessage[]; text: string; correlationId: string }) => LlmReply | undefined;

/** A fake OpenAI-compatible LLM with a latency that records each call's interval (for overlap checks). */
export interface RecordingLlm {
  baseURL: string;
  calls: LlmCall[];
  /** Calls not finished yet. */
  readonly inFlight: number;
  close(): Promise<void>;
}

type Body = { model?: string; stream?: boolean; stream_options?: { include_usage?: boolean }; messages?: LlmMessage[] };

/**
 * Starts the fake on 127.0.0.1. `latencyMs` is called per request (e.g. 300 ± 100 ms), with the call (its tag). The answer is
 * `re: <last user text>` (or what `respond` chooses), plain or streamed as the client asks.
 */
export async function startRecordingLlm(latencyMs: (call: LlmCall) => number, respond?: LlmResponder): Promise<RecordingLlm> {
  const calls: LlmCall[] = [];
  let open = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"not found"}}');
        return;
      }
      let body: Body = {};
      try { body = JSON.parse(Buffer.concat(chunks).toString()) as Body; } catch { /* answered all the same */ }
      const users = (body.messages ?? []).filter((m) => m.role === 'user');
      const auth = String(req.headers.authorization ?? '');
      const last = users.at(-1)?.content;
      const call: LlmCall = {
        replica: auth.replace(/^Bearer sk-/, ''), text: userText(last as string | null | undefined), start: Date.now(), end: 0, aborted: false,
        correlationId: String(req.headers['x-switchboard-correlation-id'] ?? ''),
        images: Array.isArray(last) ? last.filter((p) => p.type === 'image_url').length : 0,
      };
      const reply = respond?.({ messages: body.messages ?? [], text: call.text, correlationId: call.correlationId }) ?? { content: `re: ${call.text}` };
      if (reply.tag) call.tag = reply.tag;
      calls.push(call);
      open++;
      let finished = false;
      const finish = (aborted: boolean) => {
        if (finished) return;
        finished = true;
        open--;
        call.end = Date.now();
        call.aborted = aborted;
      };
      const timer = setTimeout(() => {
        if (finished) return;
        answer(res, body, reply);
        finish(false);
      }, latencyMs(call));
      res.once('close', () => { clearTimeout(timer); finish(true); });
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    calls,
    get inFlight() { return open; },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

function answer(res: ServerResponse, body: Body, reply: LlmReply): void {
  const base = { id: 'chatcmpl-chaos', created: Math.floor(Date.now() / 1000), model: body.model ?? 'chaos' };
  const usage = { prompt_tokens: 40, completion_tokens: 6, total_tokens: 46 };
  const content = 'content' in reply ? reply.content : null;
  const calls = 'toolCall' in reply ? [{ id: reply.toolCall.id, type: 'function', function: { name: reply.toolCall.name, arguments: reply.toolCall.arguments } }] : undefined;
  const finish = calls ? 'tool_calls' : 'stop';
  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({
      ...base, object: 'chat.completion', usage,
      choices: [{ index: 0, message: { role: 'assistant', content, refusal: null, ...(calls ? { tool_calls: calls } : {}) }, finish_reason: finish, logprobs: null }],
    }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`;
  const delta = calls ? { role: 'assistant', content: null, tool_calls: calls.map((c, index) => ({ index, ...c })) } : { role: 'assistant', content };
  res.end([
    chunk([{ index: 0, delta, finish_reason: null }]),
    chunk([{ index: 0, delta: {}, finish_reason: finish }]),
    ...(body.stream_options?.include_usage ? [chunk([], { usage })] : []),
    'data: [DONE]\n\n',
  ].join(''));
}
