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
}

/** A fake OpenAI-compatible LLM with a latency that records each call's interval (for overlap checks). */
export interface RecordingLlm {
  baseURL: string;
  calls: LlmCall[];
  /** Calls not finished yet. */
  readonly inFlight: number;
  close(): Promise<void>;
}

type Body = { model?: string; stream?: boolean; stream_options?: { include_usage?: boolean }; messages?: { role: string; content: string | null }[] };

/**
 * Starts the fake on 127.0.0.1. `latencyMs` is called per request (e.g. 300 ± 100 ms). The answer is
 * `re: <last user text>`, plain or streamed as the client asks.
 */
export async function startRecordingLlm(latencyMs: () => number): Promise<RecordingLlm> {
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
      const call: LlmCall = {
        replica: auth.replace(/^Bearer sk-/, ''), text: userText(users.at(-1)?.content), start: Date.now(), end: 0, aborted: false,
        correlationId: String(req.headers['x-switchboard-correlation-id'] ?? ''),
      };
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
        answer(res, body, `re: ${call.text}`);
        finish(false);
      }, latencyMs());
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

function answer(res: ServerResponse, body: Body, content: string): void {
  const base = { id: 'chatcmpl-chaos', created: Math.floor(Date.now() / 1000), model: body.model ?? 'chaos' };
  const usage = { prompt_tokens: 40, completion_tokens: 6, total_tokens: 46 };
  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({
      ...base, object: 'chat.completion', usage,
      choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: 'stop', logprobs: null }],
    }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`;
  res.end([
    chunk([{ index: 0, delta: { role: 'assistant', content }, finish_reason: null }]),
    chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]),
    ...(body.stream_options?.include_usage ? [chunk([], { usage })] : []),
    'data: [DONE]\n\n',
  ].join(''));
}
