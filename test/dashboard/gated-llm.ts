import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { userText } from '../fakes/fake-openai.ts';

/**
 * A small OpenAI-compatible server for the dashboard tests. Its answers stream word by word; an answer to a
 * message containing `[slow]` stops half-way (or, not streamed, before it starts) until {@link GatedLlm.release},
 * so a test can look at the page while the turn is still running. A message containing `[tool]` is first answered
 * with a `memory_write` tool call (then, after the tool result, as usual). Usage grows with each call, so token cards
 * change every turn.
 */
export interface GatedLlm {
  baseURL: string;
  calls: number;
  /** The answer to a user message (default: `echo: <text>`). */
  reply: (text: string) => string;
  /** Resolves when a `[slow]` answer is held (half-way through its stream, or before it starts). */
  held(): Promise<void>;
  /** Lets the held answer finish. */
  release(): void;
  close(): Promise<void>;
}

export async function startGatedLlm(): Promise<GatedLlm> {
  let heldResolve: () => void = () => undefined;
  let heldPromise = new Promise<void>((resolve) => { heldResolve = resolve; });
  let releaseResolve: () => void = () => undefined;
  let releasePromise = new Promise<void>((resolve) => { releaseResolve = resolve; });
  const llm: GatedLlm = {
    baseURL: '',
    calls: 0,
    reply: (text) => `echo: ${text}`,
    held: () => heldPromise,
    release: () => releaseResolve(),
    close: async () => undefined,
  };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    if (req.method === 'GET' && req.url?.startsWith('/v1/models')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-test', object: 'model', owned_by: 'fake' }] }));
      return;
    }
    const body = JSON.parse(raw) as { model: string; stream?: boolean; stream_options?: { include_usage?: boolean }; messages: { role: string; content: string | null }[]; tools?: unknown[] };
    const n = ++llm.calls;
    const text = userText(body.messages.filter((m) => m.role === 'user').at(-1)?.content);
    const content = llm.reply(text);
    const usage = { prompt_tokens: 100 + 10 * n, completion_tokens: 5 + n, total_tokens: 105 + 11 * n, prompt_tokens_details: { cached_tokens: 40 } };
    const base = { id: `chatcmpl-${n}`, created: Math.floor(Date.now() / 1000), model: body.model };
    const hold = async () => {
      heldResolve();
      await releasePromise;
      heldPromise = new Promise<void>((resolve) => { heldResolve = resolve; });
      releasePromise = new Promise<void>((resolve) => { releaseResolve = resolve; });
    };
    const slow = text.includes('[slow]');
    if (text.includes('[tool]') && body.messages.at(-1)?.role === 'user' && body.tools?.length) {
      const call = { id: `call-${n}`, type: 'function', function: { name: 'memory_write', arguments: JSON.stringify({ note: 'The owner likes short answers.' }) } };
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'tool_calls' }], usage }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const frame = (choices: unknown[], extra: Record<string, unknown> = {}) => res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`);
      frame([{ index: 0, delta: { role: 'assistant', content: null, tool_calls: [{ index: 0, ...call }] }, finish_reason: null }]);
      frame([{ index: 0, delta: {}, finish_reason: 'tool_calls' }]);
      if (body.stream_options?.include_usage) frame([], { usage });
      res.end('data: [DONE]\n\n');
      return;
    }
    if (!body.stream) {
      if (slow) await hold();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`);
    const pieces = content.match(/\S+\s*|\s+/g) ?? [];
    const half = slow ? Math.ceil(pieces.length / 2) : -1;
    chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
    for (const [i, piece] of pieces.entries()) {
      if (i === half) await hold();
      chunk([{ index: 0, delta: { content: piece }, finish_reason: null }]);
    }
    chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]);
    if (body.stream_options?.include_usage) chunk([], { usage });
    res.end('data: [DONE]\n\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  llm.baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  llm.close = () => new Promise<void>((resolve) => {
    releaseResolve();
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return llm;
}
