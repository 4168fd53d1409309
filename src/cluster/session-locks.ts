import pg from 'pg';
import type { Logger } from '../core/logger.ts';
import type { Fence } from './fence.ts';

/** A dedicated connection that holds at most one session's advisory lock (never a pool checkout). */
class LaneConnection implements Fence {
  key = '';
  alive = true;
  readonly client: pg.Client;
  private heartbeat: NodeJS.Timeout | undefined;
  onLost: (() => void) | undefined;

  constructor(uri: string, private readonly logger: Logger) {
    this.client = new pg.Client({ connectionString: uri });
  }

  async connect(leaseMs: number): Promise<void> {
    this.client.on('error', (err) => this.lost(err));
    this.client.on('end', () => this.lost());
    await this.client.connect();
    // A frozen process stops heart-beating; PostgreSQL then ends the connection, and the lock goes with it.
    await this.client.query(`SET idle_session_timeout = ${Math.max(1000, Math.round(leaseMs))}`);
    this.heartbeat = setInterval(() => {
      this.client.query('SELECT 1').catch((err: unknown) => this.lost(err));
    }, Math.max(250, Math.floor(leaseMs / 3)));
    this.heartbeat.unref();
  }

  markLost(): void {
    this.lost(new Error('a statement on the lane connection failed'));
    void this.client.end().catch(() => undefined);
  }

  private lost(err?: unknown): void {
    if (!this.alive) return;
    this.alive = false;
    clearInterval(this.heartbeat);
    if (this.key) this.logger.warn({ err, sessionKey: this.key }, 'lane connection lost: the session lock is gone');
    const onLost = this.onLost;
    this.onLost = undefined;
    onLost?.();
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    this.alive = false;
    await this.client.end().catch(() => undefined);
  }
}

/** A session lock this replica holds. */
export interface HeldLock {
  readonly fence: Fence;
  /** True when this hold took the lock (no other hold of this replica had it): cached state may be stale. */
  readonly fresh: boolean;
  /** Gives the hold back; the lock is released when the last hold of this replica ends. */
  release(): Promise<void>;
}

/** Options of {@link SessionLocks}. */
export interface SessionLocksOptions {
  uri: string;
  logger: Logger;
  /** `cluster.laneLeaseMs`: a connection idle (not heart-beating) that long is ended by PostgreSQL. */
  leaseMs: number;
  /** Most dedicated connections open at once. */
  maxConnections: number;
  /** Called when a held lock is lost with its connection (the session's running turn must stop). */
  onLost?: (key: string) => void;
}

/**
 * Per-session ownership in cluster mode: a session runs on a replica only while one of its dedicated lane
 * connections holds `pg_advisory_lock(hashtextextended(key, 0))`. Holds of one key on this replica share the
 * lock (turns of a key are already ordered by the local lanes); the last release unlocks it.
 */
export class SessionLocks {
  private readonly idle: LaneConnection[] = [];
  private readonly held = new Map<string, { conn: LaneConnection; holds: number }>();
  private opened = 0;
  private readonly waiters: (() => void)[] = [];
  private closed = false;

  constructor(private readonly options: SessionLocksOptions) {}

  /** How many session locks this replica holds. */
  get size(): number {
    return this.held.size;
  }

  isHeld(key: string): boolean {
    return this.held.get(key)?.conn.alive === true;
  }

  /** Takes `key`'s lock if it is free (or already held here); `undefined` when another replica holds it. */
  tryAcquire(key: string): Promise<HeldLock | undefined> {
    return this.acquire(key, 0);
  }

  /**
   * Takes `key`'s lock, waiting up to `waitMs` for another replica to release it (0: do not wait).
   * Resolves `undefined` when it stays taken.
   */
  async acquire(key: string, waitMs: number): Promise<HeldLock | undefined> {
    const mine = this.held.get(key);
    if (mine?.conn.alive) {
      mine.holds++;
      return this.hold(key, mine.conn, false);
    }
    const conn = await this.connection();
    try {
      let ok: boolean;
      if (waitMs <= 0) {
        ok = (await conn.client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [key])).rows[0]?.ok === true;
      } else {
        await conn.client.query(`SET statement_timeout = ${Math.round(waitMs)}`);
        ok = await conn.client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [key]).then(() => true, (err: { code?: string }) => {
          if (err.code === '57014') return false; // statement timeout: still taken
          throw err;
        });
        await conn.client.query('SET statement_timeout = 0');
      }
      // Another hold of this key may have been taken here meanwhile: share it, give this lock back.
      const raced = this.held.get(key);
      if (ok && raced?.conn.alive) {
        await conn.client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]);
        this.giveBack(conn);
        raced.holds++;
        return this.hold(key, raced.conn, false);
      }
      if (!ok) {
        this.giveBack(conn);
        return undefined;
      }
      conn.key = key;
      conn.onLost = () => {
        if (this.held.get(key)?.conn === conn) this.held.delete(key);
        this.options.onLost?.(key);
      };
      this.held.set(key, { conn, holds: 1 });
      return this.hold(key, conn, true);
    } catch (error) {
      this.giveBack(conn);
      throw error;
    }
  }

  private hold(key: string, conn: LaneConnection, fresh: boolean): HeldLock {
    let released = false;
    return {
      fence: conn,
      fresh,
      release: async () => {
        if (released) return;
        released = true;
        const entry = this.held.get(key);
        if (!entry || entry.conn !== conn) { this.giveBack(conn); return; }
        if (--entry.holds > 0) return;
        this.held.delete(key);
        conn.onLost = undefined;
        conn.key = '';
        if (conn.alive) await conn.client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]).catch(() => undefined);
        this.giveBack(conn);
      },
    };
  }

  private async connection(): Promise<LaneConnection> {
    for (;;) {
      if (this.closed) throw new Error('session locks are closed');
      const conn = this.idle.pop();
      if (conn?.alive) return conn;
      if (conn) { this.opened--; continue; }
      if (this.opened < this.options.maxConnections) {
        this.opened++;
        const fresh = new LaneConnection(this.options.uri, this.options.logger);
        try {
          await fresh.connect(this.options.leaseMs);
        } catch (error) {
          this.opened--;
          await fresh.close();
          throw error;
        }
        return fresh;
      }
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private giveBack(conn: LaneConnection): void {
    if (conn.alive && !this.closed) this.idle.push(conn);
    else { this.opened--; void conn.close(); }
    this.waiters.shift()?.();
  }

  /** Ends every lane connection (their locks go with them). */
  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w();
    const all = [...this.idle.splice(0), ...[...this.held.values()].map((h) => h.conn)];
    this.held.clear();
    await Promise.all(all.map((c) => c.close()));
  }
}
