import os from 'node:os';
import type pg from 'pg';
import type { Logger } from '../core/logger.ts';

/** A replica as `/status` lists it. */
export interface ReplicaInfo {
  replicaId: string;
  host: string;
  pid: number;
  url?: string;
  version: string;
  startedAt: string;
  seenAt: string;
  /** True for the replica that answers. */
  self: boolean;
}

/** This process's default replica id: host name and pid. */
export function defaultReplicaId(): string {
  return `${os.hostname()}:${process.pid}`;
}

/**
 * The replicas of the cluster: each writes its row at start and refreshes `seen_at` every `heartbeatMs`;
 * a replica is live while its row was refreshed within three heartbeats. A clean stop deletes the row.
 */
export class ReplicaRegistry {
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: { pool: pg.Pool; replicaId: string; version: string; logger: Logger; heartbeatMs?: number }) {}

  get replicaId(): string {
    return this.options.replicaId;
  }

  private get heartbeatMs(): number {
    return this.options.heartbeatMs ?? 5000;
  }

  async start(url?: string): Promise<void> {
    await this.options.pool.query(`
      INSERT INTO sb_replica (replica_id, host, pid, url, version, started_at, seen_at) VALUES ($1, $2, $3, $4, $5, now(), now())
      ON CONFLICT (replica_id) DO UPDATE SET host = $2, pid = $3, url = $4, version = $5, started_at = now(), seen_at = now()`,
    [this.options.replicaId, os.hostname(), process.pid, url ?? null, this.options.version]);
    this.timer = setInterval(() => {
      this.options.pool.query('UPDATE sb_replica SET seen_at = now() WHERE replica_id = $1', [this.options.replicaId])
        .catch((err: unknown) => this.options.logger.warn({ err }, 'could not refresh this replica in the cluster database'));
    }, this.heartbeatMs);
    this.timer.unref();
  }

  /** The live replicas, this one included. */
  async live(): Promise<ReplicaInfo[]> {
    const { rows } = await this.options.pool.query<{ replica_id: string; host: string; pid: number; url: string | null; version: string; started_at: Date; seen_at: Date }>(
      `SELECT * FROM sb_replica WHERE seen_at > now() - make_interval(secs => $1) ORDER BY replica_id`, [(3 * this.heartbeatMs) / 1000],
    );
    return rows.map((r) => ({
      replicaId: r.replica_id, host: r.host, pid: r.pid, ...(r.url ? { url: r.url } : {}), version: r.version,
      startedAt: r.started_at.toISOString(), seenAt: r.seen_at.toISOString(), self: r.replica_id === this.options.replicaId,
    }));
  }

  /**
   * Deletes this replica's row and tells the others on `sb_control` (`left`): one that joined and leaves between two
   * looks of another's watch would not be seen leaving otherwise.
   */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.options.pool.query(`WITH d AS (DELETE FROM sb_replica WHERE replica_id = $1 RETURNING replica_id)
      SELECT pg_notify('sb_control', json_build_object('op', 'left', 'from', $1::text)::text) FROM d`, [this.options.replicaId]).catch(() => undefined);
  }
}
