import type pg from 'pg';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { Logger } from '../core/logger.ts';
import { ClusterListener } from './cluster-listener.ts';
import { openClusterDatabase } from './pg-database.ts';
import { PgWorkQueue } from './pg-work-queue.ts';
import { defaultReplicaId, ReplicaRegistry } from './replicas.ts';
import type { Fence } from './fence.ts';
import { SessionLocks } from './session-locks.ts';

/** Everything a replica shares with the others, opened at start in cluster mode. */
export interface ClusterMode {
  replicaId: string;
  pool: pg.Pool;
  locks: SessionLocks;
  listener: ClusterListener;
  queue: PgWorkQueue;
  replicas: ReplicaRegistry;
  /** Asks every replica to stop `key`'s running turn (`/stop` reaches the one that runs it). */
  broadcastStop(key: string): void;
  /** Called on this replica when some replica asked to stop `key`. */
  onStopRequest(handler: (key: string) => void): void;
  /** Called on this replica when another one stopped cleanly (after giving its session locks back). */
  onReplicaLeft(handler: (replicaId: string) => void): void;
  close(): Promise<void>;
}

/** What the rest of the replica is told by the cluster's locks and queue. */
export interface ClusterHooks {
  /** A held session lock was lost with its connection: the session's running turn must stop. */
  onLockLost: (key: string) => void;
  /** A session's lock was taken afresh: read its cached state again (must not throw). */
  onClaim: (key: string, fence: Fence) => Promise<void>;
}

/** Opens the cluster database (migrating it), the lane connections, the listener and the queue. */
export async function openClusterMode(config: ResolvedConfig, logger: Logger, hooks: ClusterHooks): Promise<ClusterMode> {
  const uri = config.store;
  const replicaId = config.cluster.replicaId ?? defaultReplicaId();
  const pool = await openClusterDatabase({ uri, logger });
  const maxConcurrent = config.agentDefaults.maxConcurrent;
  const locks = new SessionLocks({ uri, logger, leaseMs: config.cluster.laneLeaseMs, maxConnections: 2 * maxConcurrent + 2, onLost: (key) => { queue.stats.leaseLosses++; hooks.onLockLost(key); } });
  const listener = new ClusterListener({ uri, logger });
  const queue: PgWorkQueue = new PgWorkQueue({ pool, locks, listener, replicaId, logger, maxClaims: maxConcurrent, pollMs: config.cluster.pollMs, onClaim: hooks.onClaim });
  const replicas = new ReplicaRegistry({ pool, replicaId, version: '0.1.0', logger });
  await listener.start();
  const stopHandlers: ((key: string) => void)[] = [];
  const leftHandlers: ((replicaId: string) => void)[] = [];
  listener.on('sb_control', (payload) => {
    const message = JSON.parse(payload) as { op?: string; key?: string; from?: string };
    if (message.from === replicaId) return;
    if (message.op === 'stop' && message.key) for (const h of stopHandlers) h(message.key);
    if (message.op === 'left' && message.from) for (const h of leftHandlers) h(message.from);
  });
  return {
    replicaId, pool, locks, listener, queue, replicas,
    broadcastStop: (key) => {
      pool.query('SELECT pg_notify($1, $2)', ['sb_control', JSON.stringify({ op: 'stop', key, from: replicaId })])
        .catch((err: unknown) => logger.warn({ err, sessionKey: key }, 'could not ask the other replicas to stop a session'));
    },
    onStopRequest: (handler) => { stopHandlers.push(handler); },
    onReplicaLeft: (handler) => { leftHandlers.push(handler); },
    close: async () => {
      queue.close();
      // The locks go back first: the others, told that this replica left, find what it left behind unlocked.
      await locks.close();
      await replicas.stop();
      await listener.close();
      await pool.end().catch(() => undefined);
    },
  };
}
