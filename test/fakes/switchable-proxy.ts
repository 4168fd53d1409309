import { createServer, Socket, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';

/** A TCP proxy on 127.0.0.1 that either forwards to a target port or drops every connection (an API that is down). */
export interface SwitchableProxy {
  /** `http://127.0.0.1:<port>` */
  url: string;
  up: boolean;
  /** Cuts every open connection (kept-alive ones too): with `up = false`, the API goes down mid-run. */
  dropConnections(): void;
  close(): Promise<void>;
}

export async function startSwitchableProxy(targetPort: number, up = false): Promise<SwitchableProxy> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    if (!proxy.up) {
      client.destroy();
      return;
    }
    const upstream = new Socket();
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.connect(targetPort, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxy: SwitchableProxy = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    up,
    dropConnections: () => { for (const s of sockets) s.destroy(); },
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
  return proxy;
}
