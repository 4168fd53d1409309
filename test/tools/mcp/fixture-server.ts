// A small MCP server for the tests, on the official SDK: run with `node --import tsx fixture-server.ts`.
//   FIXTURE_MODE=silent  never answers initialize
//   FIXTURE_MODE=crash   exits right after answering tools/list (a crash loop)
//   FIXTURE_MODE=paged   answers tools/list three tools per page
//   FIXTURE_GATE=<file>  exits at once while that file exists (a server that stays down)
//   FIXTURE_DELAY_MS=<n> reads nothing for n ms before it answers (a slow start)
//   FIXTURE_LOG=<file>   appends what happened (calls, cancellations)
import { appendFileSync, existsSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const log = (line: string) => { if (process.env.FIXTURE_LOG) appendFileSync(process.env.FIXTURE_LOG, `${process.pid} ${line}\n`); };

/** The fixture's tools, shared with the HTTP variant. */
export function fixtureServer(): McpServer {
  const server = new McpServer({ name: 'fixture', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  server.registerTool('echo', { description: 'Echoes the text back.', inputSchema: { text: z.string().describe('what to echo') } }, async ({ text }) => {
    log(`echo ${text}`);
    return { content: [{ type: 'text', text: `echo: ${text}` }] };
  });
  server.registerTool('slow', { description: 'Waits until cancelled.', inputSchema: {} }, async (_args, extra) => {
    log('slow started');
    await new Promise<void>((resolve) => extra.signal.addEventListener('abort', () => { log('slow cancelled'); resolve(); }, { once: true }));
    return { content: [{ type: 'text', text: 'too late' }] };
  });
  server.registerTool('boom', { description: 'Always fails.', inputSchema: {} }, async () => {
    throw new Error('the widget exploded');
  });
  server.registerTool('picture', { description: 'Returns an image and a resource.', inputSchema: {} }, async () => ({
    content: [
      { type: 'text', text: 'here it is' },
      { type: 'image', data: Buffer.alloc(3000, 7).toString('base64'), mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'file:///tmp/report.txt', mimeType: 'text/plain', text: 'x'.repeat(1234) } },
    ],
  }));
  server.registerTool('die', { description: 'Exits in the middle of the call.', inputSchema: {} }, async () => {
    log('die');
    setTimeout(() => process.exit(3), 5);
    return new Promise(() => undefined);
  });
  server.registerTool('big', { description: 'Returns n characters.', inputSchema: { n: z.number() } }, async ({ n }) => ({ content: [{ type: 'text', text: 'x'.repeat(n) }] }));
  server.registerTool('noop', { description: 'Does nothing (the bench measures the call itself).', inputSchema: {} }, async () => ({ content: [] }));
  server.registerTool('grow', { description: 'Adds a tool named late.', inputSchema: {} }, async () => {
    server.registerTool('late', { description: 'Arrived later.', inputSchema: { n: z.number() } }, async ({ n }) => ({ content: [{ type: 'text', text: `late ${n}` }] }));
    return { content: [{ type: 'text', text: 'grown' }] };
  });
  return server;
}

if (process.argv[1]?.endsWith('fixture-server.ts')) {
  if (process.env.FIXTURE_GATE && existsSync(process.env.FIXTURE_GATE)) { log('gated'); process.exit(5); }
  log('started');
  // Requests sent meanwhile wait in the pipe, as with a server that loads for a while before reading stdin.
  if (process.env.FIXTURE_DELAY_MS) await new Promise((resolve) => setTimeout(resolve, Number(process.env.FIXTURE_DELAY_MS)));
  if (process.env.FIXTURE_MODE === 'silent') {
    process.stdin.resume();
  } else {
    const transport = new StdioServerTransport();
    if (process.env.FIXTURE_MODE === 'crash') {
      const send = transport.send.bind(transport);
      transport.send = async (message) => {
        await send(message);
        if ('result' in message && 'tools' in message.result) setTimeout(() => process.exit(4), 20);
      };
    }
    const server = fixtureServer();
    if (process.env.FIXTURE_MODE === 'paged') {
      // The SDK's server never pages: wrap its own tools/list handler (a private map) and hand out three per page.
      const handlers = (server.server as unknown as { _requestHandlers: Map<string, (request: { params?: { cursor?: string } }, extra: unknown) => Promise<{ tools: unknown[] }>> })._requestHandlers;
      const all = handlers.get('tools/list')!;
      handlers.set('tools/list', async (request, extra) => {
        const { tools } = await all(request, extra);
        const from = Number(request.params?.cursor ?? 0);
        return { tools: tools.slice(from, from + 3), ...(from + 3 < tools.length ? { nextCursor: String(from + 3) } : {}) };
      });
    }
    await server.connect(transport);
  }
}
