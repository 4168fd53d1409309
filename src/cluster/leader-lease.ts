import pg from 'pg';
import type { ChannelLease, ChannelLeases, LeaseHandlers } from '../core/channel-leases.ts';
import type { Logger } from '../core/logger.ts';

/** Timer functions, injected so tests decide when a heartbeat or a retry fires. */
export interface LeaseTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: LeaseTimers = {
  setTimeout: (fn, ms) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

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
}

const LOCK = 'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok';
const UNLOCK = 'SELECT pg_advisory_unlock(hashtextextended($1, 0))';

/**
 * Leader election for one name (SPEC §13; design §6.4): `pg_try_advisory_lock` on a dedicated `pg.Client`
 * (never a pool checkout) with `SET idle_session_timeout = leaseMs` and a `SELECT 1` every `leaseMs / 3`.
 * A frozen or dead holder stops heart-beating, PostgreSQL ends its connection and the lock goes with it;
 * the others try every `pollMs` and one of them wins. The holder learns of a lost connection from its
 * next heartbeat (or the socket) and is told `lost` at once.
 */
export class LeaderLease implements ChannelLease {
  readonly name: string;
  private readonly options: LeaderLeaseOptions;
  private readonly timers: LeaseTimers;
  private readonly lockKey: string;
  private client?: pg.Client;
  private leader = false;
  private stopped = false;
  private retryTimer?: unknown;
  private beatTimer?: unknown;
  private trying?: Promise<void>;

  constructor(options: LeaderLeaseOptions) {
    this.options = options;
    this.name = options.name;
    this.lockKey = `lease:${options.name}`;
    this.timers = options.timers ?? realTimers;
  }

  get held(): boolean {
    return this.leader;
  }

  /** The backend pid of the lease connection (tests end it to play a dead holder). */
  get backendPid(): number | undefined {
    return (this.client as unknown as { processID?: number } | undefined)?.processID;
  }

  /** Makes the first try; resolves after it (won or not). Later tries run every `pollMs`. */
  async start(): Promise<void> {
    this.stopped = false;
    this.attempt();
    await this.trying;
  }

  async resign(): Promise<void> {
    if (!this.leader) return;
    this.leader = false;
    const client = this.client;
    await client?.query(UNLOCK, [this.lockKey]).catch((err: unknown) => this.connectionLost(client, err));
    this.options.logger.info({ lease: this.name }, 'lease given up');
    this.options.handlers?.lost();
    this.scheduleRetry();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer !== undefined) this.timers.clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.trying;
    const client = this.client;
    this.client = undefined;
    if (this.beatTimer !== undefined) this.timers.clearTimeout(this.beatTimer);
    this.beatTimer = undefined;
    if (!client) return;
    if (this.leader) await client.query(UNLOCK, [this.lockKey]).catch(() => undefined);
    this.leader = false;
    await client.end().catch(() => undefined);
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
      client = this.client ?? await this.connect();
      const ok = (await client.query<{ ok: boolean }>(LOCK, [this.lockKey])).rows[0]?.ok === true;
      if (!ok) return;
      if (this.stopped || client !== this.client) {
        await client.query(UNLOCK, [this.lockKey]).catch(() => undefined);
        return;
      }
      this.leader = true;
      this.options.logger.info({ lease: this.name }, 'lease won');
      this.options.handlers?.won();
    } catch (err) {
      this.options.logger.debug({ err, lease: this.name }, 'lease: try failed; trying again');
      if (client) this.connectionLost(client, err);
    }
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: this.options.uri, keepAlive: true });
    client.on('error', (err) => this.connectionLost(client, err));
    client.on('end', () => this.connectionLost(client));
    try {
      await client.connect();
      // A frozen process stops heart-beating; PostgreSQL then ends the connection, and the lock goes with it.
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
      client.query('SELECT 1').then(() => { if (client === this.client) this.beat(client); }, (err: unknown) => this.connectionLost(client, err));
    }, Math.max(250, Math.floor(this.options.leaseMs / 3)));
  }

  private connectionLost(client: pg.Client, err?: unknown): void {
    if (client !== this.client) return;
    this.client = undefined;
    if (this.beatTimer !== undefined) this.timers.clearTimeout(this.beatTimer);
    this.beatTimer = undefined;
    void client.end().catch(() => undefined);
    if (this.leader) {
      this.leader = false;
      this.options.logger.warn({ err, lease: this.name }, 'lease lost with its connection');
      this.options.handlers?.lost();
    }
    this.scheduleRetry();
  }
}

/** Options of {@link PgChannelLeases}. */
export type PgChannelLeasesOptions = Omit<LeaderLeaseOptions, 'name' | 'handlers'>;

/** {@link ChannelLeases} on PostgreSQL: one {@link LeaderLease} (one dedicated connection) per campaign. */
export class PgChannelLeases implements ChannelLeases {
  private readonly leases = new Set<LeaderLease>();

  constructor(private readonly options: PgChannelLeasesOptions) {}

  async campaign(name: string, handlers: LeaseHandlers): Promise<ChannelLease> {
    const lease = new LeaderLease({ ...this.options, name, handlers });
    this.leases.add(lease);
    const stop = lease.stop.bind(lease);
    lease.stop = async () => {
      this.leases.delete(lease);
      await stop();
    };
    await lease.start();
    return lease;
  }

  /** Stops every campaign still running (their leases are given up). */
  async close(): Promise<void> {
    await Promise.all([...this.leases].map((l) => l.stop()));
  }
}
