import type pg from 'pg';
import type { ChannelLease, ChannelLeases, LeaseHandlers } from '../core/channel-leases.ts';
import type { Logger } from '../core/logger.ts';
import { LeaseConnection, realLeaseTimers, type LeaseTimers } from './lease-connection.ts';

export type { LeaseTimers } from './lease-connection.ts';
export { LeaseConnection } from './lease-connection.ts';

/** Options of {@link LeaderLease}. */
export interface LeaderLeaseOptions {
  uri: string;
  /** The lease's name; its advisory lock is `hashtextextended('lease:' || name, 0)`. */
  name: string;
  /** `cluster.laneLeaseMs`: PostgreSQL ends the connection (and the lease) after this long without a heartbeat. */
  leaseMs: number;
  /** `cluster.pollMs`: how often a replica that does not hold the lease tries again. */
  pollMs: number;
  logger: Logger;
  handlers?: LeaseHandlers;
  timers?: LeaseTimers;
  /** A connection shared with other leases of this replica (default: one of its own, ended by `stop`). */
  connection?: LeaseConnection;
  /** Called each time the lease was held and went with its connection (not on resign or stop). */
  onLoss?: () => void;
}

const LOCK = 'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok';
const UNLOCK = 'SELECT pg_advisory_unlock(hashtextextended($1, 0))';

/**
 * Leader election for one name (SPEC §13; design §6.4): `pg_try_advisory_lock` on a dedicated connection
 * ({@link LeaseConnection}: `idle_session_timeout = leaseMs`, a `SELECT 1` every `leaseMs / 3`), its own or
 * one shared by all of a replica's leases. A frozen or dead holder stops heart-beating, PostgreSQL ends its
 * connection and the lock goes with it; the others try every `pollMs` and one of them wins. The holder learns
 * of a lost connection from its next query (or the socket) and is told `lost` at once.
 */
export class LeaderLease implements ChannelLease {
  readonly name: string;
  private readonly options: LeaderLeaseOptions;
  private readonly timers: LeaseTimers;
  private readonly lockKey: string;
  private readonly connection: LeaseConnection;
  private readonly ownsConnection: boolean;
  /** The client the lock was won on, while held. */
  private heldOn?: pg.Client;
  private unwatch?: () => void;
  private leader = false;
  private stopped = false;
  private retryTimer?: unknown;
  private trying?: Promise<void>;

  constructor(options: LeaderLeaseOptions) {
    this.options = options;
    this.name = options.name;
    this.lockKey = `lease:${options.name}`;
    this.connection = options.connection ?? new LeaseConnection({ uri: options.uri, leaseMs: options.leaseMs, logger: options.logger, ...(options.timers ? { timers: options.timers } : {}) });
    this.ownsConnection = !options.connection;
    this.timers = options.timers ?? realLeaseTimers;
  }

  get held(): boolean {
    return this.leader;
  }

  /** The backend pid of the lease's connection (tests end it to play a dead holder). */
  get backendPid(): number | undefined {
    return this.connection.backendPid;
  }

  /** The connection's open client (tests read its settings). */
  get client(): pg.Client | undefined {
    return this.connection.current;
  }

  /** Makes the first try; resolves after it (won or not). Later tries run every `pollMs`. */
  async start(): Promise<void> {
    this.stopped = false;
    this.unwatch ??= this.connection.watch((client, err) => this.connectionLost(client, err));
    this.attempt();
    await this.trying;
  }

  async resign(): Promise<void> {
    if (!this.leader) return;
    const client = this.heldOn;
    this.release();
    if (client) await client.query(UNLOCK, [this.lockKey]).catch((err: unknown) => this.connection.lost(client, err));
    this.options.logger.info({ lease: this.name }, 'lease given up');
    this.options.handlers?.lost();
    this.scheduleRetry();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer !== undefined) this.timers.clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.trying;
    this.unwatch?.();
    this.unwatch = undefined;
    const client = this.leader ? this.heldOn : undefined;
    this.release();
    if (client && client === this.connection.current) await client.query(UNLOCK, [this.lockKey]).catch(() => undefined);
    if (this.ownsConnection) await this.connection.close();
  }

  /** No longer the leader: the name is free for another campaign of this replica's connection. */
  private release(): void {
    this.leader = false;
    this.heldOn = undefined;
    if (this.connection.holders.get(this.lockKey) === this) this.connection.holders.delete(this.lockKey);
  }

  private attempt(): void {
    this.retryTimer = undefined;
    if (this.trying || this.stopped || this.leader) return;
    this.trying = this.tryOnce().finally(() => {
      this.trying = undefined;
      this.scheduleRetry();
    });
  }

  private scheduleRetry(): void {
    if (this.stopped || this.leader || this.trying || this.retryTimer !== undefined) return;
    this.retryTimer = this.timers.setTimeout(() => this.attempt(), this.options.pollMs);
  }

  private async tryOnce(): Promise<void> {
    let client: pg.Client | undefined;
    try {
      client = await this.connection.acquire();
      // Advisory locks are re-entrant within a session: a second campaign for a name this connection holds
      // would "win" it too. The name is reserved before asking, and given back when not won.
      const holder = this.connection.holders.get(this.lockKey);
      if (holder !== undefined && holder !== this) return;
      this.connection.holders.set(this.lockKey, this);
      const ok = (await client.query<{ ok: boolean }>(LOCK, [this.lockKey])).rows[0]?.ok === true;
      const current = client === this.connection.current;
      if (!ok || this.stopped || !current) {
        if (current && this.connection.holders.get(this.lockKey) === this) this.connection.holders.delete(this.lockKey);
        if (ok && current) await client.query(UNLOCK, [this.lockKey]).catch(() => undefined);
        return;
      }
      this.leader = true;
      this.heldOn = client;
      this.options.logger.info({ lease: this.name }, 'lease won');
      this.options.handlers?.won();
    } catch (err) {
      this.options.logger.debug({ err, lease: this.name }, 'lease: try failed; trying again');
      if (client) this.connection.lost(client, err);
    }
  }

  private connectionLost(client: pg.Client, err?: unknown): void {
    if (this.leader && this.heldOn === client) {
      this.leader = false;
      this.heldOn = undefined;
      this.options.logger.warn({ err, lease: this.name }, 'lease lost with its connection');
      this.options.onLoss?.();
      this.options.handlers?.lost();
    }
    this.scheduleRetry();
  }
}

/** Options of {@link PgChannelLeases}. */
export type PgChannelLeasesOptions = Omit<LeaderLeaseOptions, 'name' | 'handlers' | 'connection' | 'onLoss'>;

/**
 * {@link ChannelLeases} on PostgreSQL: one {@link LeaderLease} per campaign, all on one {@link LeaseConnection}
 * (one connection and one heartbeat per replica, however many Telegram accounts and Discord shards it
 * campaigns for). A lost connection loses every lease on it at once: each is told `lost`, counted in
 * {@link losses}, and campaigns again on a new connection after `pollMs`.
 */
export class PgChannelLeases implements ChannelLeases {
  private readonly leases = new Set<LeaderLease>();
  private readonly connection: LeaseConnection;
  private lossCount = 0;

  constructor(private readonly options: PgChannelLeasesOptions) {
    this.connection = new LeaseConnection({ uri: options.uri, leaseMs: options.leaseMs, logger: options.logger, ...(options.timers ? { timers: options.timers } : {}) });
  }

  /** Leases this replica held and lost with their connection since start (`/metrics`). */
  get losses(): number {
    return this.lossCount;
  }

  /** The backend pid of the shared connection, when open (tests end it to play a cut network). */
  get backendPid(): number | undefined {
    return this.connection.backendPid;
  }

  async campaign(name: string, handlers: LeaseHandlers): Promise<ChannelLease> {
    const lease = new LeaderLease({ ...this.options, name, handlers, connection: this.connection, onLoss: () => { this.lossCount++; } });
    this.leases.add(lease);
    const stop = lease.stop.bind(lease);
    lease.stop = async () => {
      this.leases.delete(lease);
      await stop();
      // The last campaign gone: nothing needs the connection (a new campaign opens it again).
      if (this.leases.size === 0) await this.connection.close();
    };
    await lease.start();
    return lease;
  }

  /** Stops every campaign still running (their leases are given up) and ends the connection. */
  async close(): Promise<void> {
    await Promise.all([...this.leases].map((l) => l.stop()));
    await this.connection.close();
  }
}
