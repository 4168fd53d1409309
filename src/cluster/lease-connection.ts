import pg from 'pg';
import type { Logger } from '../core/logger.ts';

/** Timer functions, injected so tests decide when a heartbeat or a retry fires. */
export interface LeaseTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Real timers, unref'd: a lease never keeps the process alive. */
export const realLeaseTimers: LeaseTimers = {
  setTimeout: (fn, ms) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Options of {@link LeaseConnection}. */
export interface LeaseConnectionOptions {
  uri: string;
  /** `cluster.laneLeaseMs`: PostgreSQL ends the connection (and every lock on it) after this long without a query. */
  leaseMs: number;
  logger: Logger;
  timers?: LeaseTimers;
  /** Its `application_name` in `pg_stat_activity`. */
  applicationName?: string;
}

/** Told that a connection ended (its session-level locks went with it). */
export type ConnectionLostHandler = (client: pg.Client, err?: unknown) => void;

/**
 * The dedicated connection (never a pool checkout) that holds leases' advisory locks, one per replica
 * however many leases it campaigns for: `SET idle_session_timeout = leaseMs` and a `SELECT 1` every
 * `leaseMs / 3`, so a frozen process loses all of them within the lease time. Connected on first use and
 * again after a loss; when it ends (socket error, a failed query, the server ending it) every watcher is
 * told at once with the client that ended, and the next {@link acquire} opens a new one.
 */
export class LeaseConnection {
  /** Lock keys held (or being tried) on the current client, and by whom: one campaign per name per replica. */
  readonly holders = new Map<string, object>();
  private readonly options: LeaseConnectionOptions;
  private readonly timers: LeaseTimers;
  private readonly watchers = new Set<ConnectionLostHandler>();
  private client?: pg.Client;
  private connecting?: Promise<pg.Client>;
  private beatTimer?: unknown;

  constructor(options: LeaseConnectionOptions) {
    this.options = options;
    this.timers = options.timers ?? realLeaseTimers;
  }

  /** The open client, if any. */
  get current(): pg.Client | undefined {
    return this.client;
  }

  /** The backend pid of the open connection (tests end it to play a dead holder or a cut network). */
  get backendPid(): number | undefined {
    return (this.client as unknown as { processID?: number } | undefined)?.processID;
  }

  /** Calls `handler` whenever a connection of this object ends; returns the unsubscribe function. */
  watch(handler: ConnectionLostHandler): () => void {
    this.watchers.add(handler);
    return () => this.watchers.delete(handler);
  }

  /** The open client, or a new one (concurrent callers share one connect). */
  acquire(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= this.connect().finally(() => { this.connecting = undefined; });
    return this.connecting;
  }

  /** Declares `client` ended (a query on it failed): ends it and tells every watcher; a stale client is ignored. */
  lost(client: pg.Client, err?: unknown): void {
    if (client !== this.client) return;
    this.client = undefined;
    this.holders.clear();
    if (this.beatTimer !== undefined) this.timers.clearTimeout(this.beatTimer);
    this.beatTimer = undefined;
    void client.end().catch(() => undefined);
    this.options.logger.debug({ err }, 'lease connection ended; its leases are lost');
    for (const watcher of [...this.watchers]) watcher(client, err);
  }

  /** Ends the connection (its locks go with it) without telling the watchers; a later {@link acquire} opens a new one. */
  async close(): Promise<void> {
    await this.connecting?.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    this.holders.clear();
    if (this.beatTimer !== undefined) this.timers.clearTimeout(this.beatTimer);
    this.beatTimer = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: this.options.uri, keepAlive: true, application_name: this.options.applicationName ?? 'switchboard-leases' });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      // A frozen process stops heart-beating; PostgreSQL then ends the connection, and the locks go with it.
      await client.query(`SET idle_session_timeout = ${Math.max(1000, Math.round(this.options.leaseMs))}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    this.client = client;
    this.beat(client);
    return client;
  }

  private beat(client: pg.Client): void {
    this.beatTimer = this.timers.setTimeout(() => {
      this.beatTimer = undefined;
      if (client !== this.client) return;
      client.query('SELECT 1').then(() => { if (client === this.client) this.beat(client); }, (err: unknown) => this.lost(client, err));
    }, Math.max(250, Math.floor(this.options.leaseMs / 3)));
  }
}
