// A minimal OpenAI-compatible server that answers at once, run in its own process so that it does not share
// the measured process's event loop. Prints its port on stdout.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const reply = (model: string) => JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 1_700_000_000, model,
  choices: [{ index: 0, message: { role: 'assistant', content: 'Sure: here is a short answer.', refusal: null }, finish_reason: 'stop', logprobs: null }],
  usage: { prompt_tokens: 42, completion_tokens: 8, total_tokens: 50 },
});

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let model = 'bench';
    try { model = (JSON.parse(Buffer.concat(chunks).toString()) as { model?: string }).model ?? model; } catch { /* keep default */ }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(reply(model));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => { server.closeAllConnections(); server.close(() => process.exit(0)); });
