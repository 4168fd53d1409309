import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { ConfigError } from '../core/errors.ts';

/** Serves `fetch` on `host:port` (0 = any free port); a port in use is a {@link ConfigError} that says what to do. */
export async function listen(fetch: (request: Request) => Response | Promise<Response>, host: string, port: number): Promise<{ server: ServerType; port: number }> {
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve({ fetch, hostname: host, port }, () => resolve(s));
    s.once('error', (error: NodeJS.ErrnoException) => reject(error.code === 'EADDRINUSE'
      ? new ConfigError(`Port ${port} on ${host} is in use: stop the other process or set SWITCHBOARD_PORT.`)
      : error));
  });
  return { server, port: (server.address() as AddressInfo).port };
}

/**
 * Closes a server without cutting answers still being written (a web chat reply whose turn just ended):
 * active requests may finish, idle keep-alive connections end now, anything still open after `cutAfterMs` is cut.
 */
export async function closeGracefully(server: ServerType, cutAfterMs = 2000): Promise<void> {
  const http = server as { closeAllConnections?: () => void; closeIdleConnections?: () => void };
  await new Promise<void>((resolve) => {
    const cut = setTimeout(() => http.closeAllConnections?.(), cutAfterMs);
    server.close(() => { clearTimeout(cut); resolve(); });
    http.closeIdleConnections?.();
  });
}
