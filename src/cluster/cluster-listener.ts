import pg from 'pg';
import type { Logger } from '../core/logger.ts';

const CHANNELS = ['sb_ready', 'sb_done', 'sb_control', 'sb_events', 'sb_webchat'] as const;

/** What `application_name` the listening connection reports (so an operator, or a test, can find it in `pg_stat_activity`). */
export const LISTENER_APPLICATION_NAME = 'switchboard-listener';
/** A notification channel of the cluster. */
export type ClusterChannel = (typeof CHANNELS)[number];

/**
 * One dedicated connection that LISTENs to the cluster's notifications (new work, finished work, control
 * messages such as `/stop`). Notifications are not durable: everything that acts on them also polls. A lost
 * connection is reopened with backoff.
 */
export class ClusterListener {
  private client: pg.Client | undefined;
  private readonly handlers = new Map<ClusterChannel, ((payload: string) => void)[]>();
  private readonly connectHandlers: ((again: boolean) => void)[] = [];
  private connections = 0;
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private attempts = 0;

  constructor(private readonly options: { uri: string; logger: Logger; maxBackoffMs?: number }) {}

  on(channel: ClusterChannel, handler: (payload: string) => void): void {
    this.handlers.set(channel, [...(this.handlers.get(channel) ?? []), handler]);
  }

  /**
   * Calls `handler` each time the connection is listening: `again` is false the first time and true after a
   * reconnection, when notifications sent meanwhile were missed (read what they would have said from the database).
   */
  onConnect(handler: (again: boolean) => void): void {
    this.connectHandlers.push(handler);
  }

  /** Whether the connection is listening now. */
  get listening(): boolean {
    return this.client !== undefined;
  }

  /** Connects (and keeps reconnecting in the background after a failure). */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.options.uri, application_name: LISTENER_APPLICATION_NAME });
    client.on('notification', (n) => {
      for (const handler of this.handlers.get(n.channel as ClusterChannel) ?? []) {
        try { handler(n.payload ?? ''); } catch (err) { this.options.logger.error({ err, channel: n.channel }, 'a cluster notification handler failed'); }
      }
    });
    const lost = (err?: unknown) => {
      if (this.client !== client) return;
      this.client = undefined;
      if (!this.closed) this.options.logger.warn({ err }, 'the cluster notification connection ended; reconnecting (polling covers the gap)');
      this.scheduleReconnect();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    try {
      await client.connect();
      for (const channel of CHANNELS) await client.query(`LISTEN ${channel}`);
      this.client = client;
      this.attempts = 0;
      const again = this.connections++ > 0;
      for (const handler of this.connectHandlers) {
        try { handler(again); } catch (err) { this.options.logger.error({ err }, 'a cluster listener connect handler failed'); }
      }
    } catch (error) {
      await client.end().catch(() => undefined);
      this.options.logger.warn({ err: error }, 'could not listen for cluster notifications; retrying');
      this.scheduleReconnect();
    }
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retryTimer) return;
    const delay = Math.min(this.options.maxBackoffMs ?? 5000, 100 * 2 ** this.attempts++);
    this.retryTimer = setTimeout(() => { this.retryTimer = undefined; void this.connect(); }, delay);
    this.retryTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}
