import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/** Statements seen by a {@link StatementCounter}, in total and by SQL text (whitespace collapsed). */
export interface StatementTally {
  total: number;
  bySql: Map<string, number>;
}

/**
 * A TCP proxy in front of PostgreSQL that counts the statements its clients run: every simple `Query` and every
 * extended-protocol `Execute` message is one statement (node-postgres parses each parameterized query anew, so
 * the `Parse` before an `Execute` names its SQL). Needs no server setting (`pg_stat_statements` needs
 * `shared_preload_libraries`), sees every connection of every process pointed at it (pools, lane connections,
 * the listener, keyv), and costs a localhost hop. For benches and tests only.
 */
export class StatementCounter {
  private total = 0;
  private readonly bySql = new Map<string, number>();
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: Server, private readonly target: { host: string; port: number }) {}

  /** Listens on 127.0.0.1 (a free port) and forwards to `targetUri`'s host and port. */
  static async start(targetUri: string): Promise<StatementCounter> {
    const url = new URL(targetUri);
    const target = { host: url.hostname || '127.0.0.1', port: Number(url.port || 5432) };
    const server = createServer();
    const counter = new StatementCounter(server, target);
    server.on('connection', (socket) => counter.pipe(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return counter;
  }

  /** `uri` with its host and port replaced by the proxy's. */
  uri(uri: string): string {
    const url = new URL(uri);
    url.hostname = '127.0.0.1';
    url.port = String((this.server.address() as AddressInfo).port);
    return url.toString();
  }

  /** What was counted since the last {@link reset} (a copy). */
  tally(): StatementTally {
    return { total: this.total, bySql: new Map(this.bySql) };
  }

  reset(): void {
    this.total = 0;
    this.bySql.clear();
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private count(sql: string): void {
    this.total++;
    const text = sql.replace(/\s+/g, ' ').trim().slice(0, 160);
    this.bySql.set(text, (this.bySql.get(text) ?? 0) + 1);
  }

  private pipe(client: Socket): void {
    const server = connect(this.target.port, this.target.host);
    this.sockets.add(client).add(server);
    const end = () => { client.destroy(); server.destroy(); this.sockets.delete(client); this.sockets.delete(server); };
    client.on('error', end).on('close', end);
    server.on('error', end).on('close', end);
    server.on('data', (chunk: Buffer) => client.write(chunk));
    let buffered = Buffer.alloc(0);
    let started = false;
    let parsed = '';
    client.on('data', (chunk: Buffer) => {
      server.write(chunk);
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        // The startup message (and an SSL request) has no type byte: a length, then the rest.
        const head = started ? 5 : 4;
        if (buffered.length < head) break;
        const length = started ? buffered.readInt32BE(1) : buffered.readInt32BE(0);
        const size = started ? length + 1 : length;
        if (buffered.length < size) break;
        if (!started) {
          // 80877103: an SSL request, answered by the server before the real startup message.
          if (buffered.readInt32BE(4) !== 80877103) started = true;
        } else {
          const type = String.fromCharCode(buffered[0]!);
          if (type === 'Q') this.count(buffered.subarray(5, size - 1).toString('utf8'));
          else if (type === 'P') {
            const body = buffered.subarray(5, size);
            const nameEnd = body.indexOf(0);
            parsed = body.subarray(nameEnd + 1, body.indexOf(0, nameEnd + 1)).toString('utf8');
          } else if (type === 'E') this.count(parsed);
        }
        buffered = buffered.subarray(size);
      }
    });
  }
}
