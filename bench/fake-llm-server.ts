// A minimal OpenAI-compatible server that answers at once, run in its own process so that it does not share
// the measured process's event loop. Prints its port on stdout.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const reply = (model: string) => JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 1_700_000_000, model,
  choices: [{ index: 0, message: { role: 'assistant', content: 'Sure: here is a short answer.', refusal: null }, finish_reason: 'stop', logprobs: null }],
  usage: { prompt_tokens: 42, completion_tokens: 8, total_tokens: 50 },
});

/** A call of the `noop` tool, while the last user message asks for `rounds=N` and fewer results follow it. */
const toolCall = (model: string, n: number) => JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 1_700_000_000, model,
  choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: null, tool_calls: [{ id: `call_${n}`, type: 'function', function: { name: 'noop', arguments: '{}' } }] }, finish_reason: 'tool_calls', logprobs: null }],
  usage: { prompt_tokens: 42, completion_tokens: 8, total_tokens: 50 },
});

type Body = { model?: string; messages?: { role: string; content: string | null }[] };

function answer(body: Body): string {
  const model = body.model ?? 'bench';
  const messages = body.messages ?? [];
  let lastUser = -1;
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === 'user') { lastUser = i; break; }
  const rounds = Number(/rounds=(\d+)/.exec(messages[lastUser]?.content ?? '')?.[1] ?? 0);
  const done = messages.slice(lastUser + 1).filter((m) => m.role === 'tool').length;
  return done < rounds ? toolCall(model, done) : reply(model);
}

/** Requests and their body bytes since the last `GET /stats` (which answers and resets them). */
let requests = 0;
let bytes = 0;

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ requests, bytes }));
    requests = 0;
    bytes = 0;
    return;
  }
  // A provider that is down (the failover bench's primary): 503 at once, as an overloaded API answers.
  if (req.url?.startsWith('/down/')) {
    req.resume();
    req.on('end', () => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'The server is overloaded.', type: 'server_error', code: null } }));
    });
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    requests++;
    bytes += raw.length;
    let body: Body = {};
    try { body = JSON.parse(raw.toString()) as Body; } catch { /* answer plainly */ }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(answer(body));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => { server.closeAllConnections(); server.close(() => process.exit(0)); });
