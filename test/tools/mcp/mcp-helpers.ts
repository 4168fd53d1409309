import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { createLogger, type Logger } from '../../../src/core/logger.ts';
import { fixtureServer } from './fixture-server.ts';

/** A logger whose lines the test reads. */
export function capturingLogger(): { logger: Logger; lines: { level: number; msg: string }[] } {
  const lines: { level: number; msg: string }[] = [];
  const out = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l)); cb(); } });
  return { logger: createLogger({ level: 'debug', destination: out }), lines };
}

/**
 * A stateful Streamable HTTP MCP server (a session id per client, as most real servers), without the optional
 * GET stream, so only calls and pings can notice it is gone. `restart()` listens again on the same port with
 * no sessions, as a restarted server does.
 */
export async function statefulHttpServer(): Promise<{ url: string; close(): Promise<void>; restart(): Promise<void>; sessions(): number }> {
  let sessions = new Map<string, StreamableHTTPServerTransport>();
  let server: Server | undefined;
  let port = 0;
  const listen = async () => {
    server = createServer(async (req: IncomingMessage, res) => {
      if (req.method === 'GET') { res.writeHead(405).end(); return; }
      let raw = '';
      for await (const chunk of req) raw += chunk;
      const body: unknown = raw ? JSON.parse(raw) : undefined;
      const id = req.headers['mcp-session-id'] as string | undefined;
      let transport = id ? sessions.get(id) : undefined;
      if (!transport) {
        if (id || !isInitializeRequest(body)) { res.writeHead(404, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}'); return; }
        const own = sessions;
        const created: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(), enableJsonResponse: true, onsessioninitialized: (sid) => { own.set(sid, created); },
        });
        await fixtureServer().connect(created);
        transport = created;
      }
      await transport.handleRequest(req, res, body);
    });
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  };
  const close = async () => {
    const s = server;
    server = undefined;
    for (const t of sessions.values()) await t.close();
    sessions = new Map();
    if (s) await new Promise<void>((resolve) => { s.closeAllConnections(); s.close(() => resolve()); });
  };
  await listen();
  return { url: `http://127.0.0.1:${port}/mcp`, close, restart: async () => { await close(); await listen(); }, sessions: () => sessions.size };
}
