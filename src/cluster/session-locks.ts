import pg from 'pg';
import type { Logger } from '../core/logger.ts';
import type { Fence } from './fence.ts';

/** A dedicated connection that holds at most one session's advisory lock (never a pool checkout). */
class LaneConnection implements Fence {
  key = '';
  alive = true;
  readonly client: pg.Client;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastUsed = Date.now();
  onLost: (() => void) | undefined;

  constructor(uri: string, private readonly logger: Logger) {
    this.client = new pg.Client({ connectionString: uri });
    // Every statement on the connection (the queue's, the stores' through the fence) counts as a heartbeat.
    const query = this.client.query.bind(this.client) as (...args: unknown[]) => unknown;
    (this.client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      this.lastUsed = Date.now();
      return query(...args);
    };
  }

  async connect(leaseMs: number): Promise<void> {
    this.client.on('error', (err) => this.lost(err));
    this.client.on('end', () => this.lost());
    await this.client.connect();
    // A frozen process stops heart-beating; PostgreSQL then ends the connection, and the lock goes with it.
    await this.client.query(`SET idle_session_timeout = ${Math.max(1000, Math.round(leaseMs))}`);
    // Only a connection idle for a beat sends one: a busy lane's statements keep it alive.
    const beat = Math.max(250, Math.floor(leaseMs / 3));
    this.heartbeat = setInterval(() => {
      if (Date.now() - this.lastUsed >= beat - 50) this.client.query('SELECT 1').catch((err: unknown) => this.lost(err));
    }, beat);
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

/**
 * A statement to run with the lock statement, as one (saves a round trip and a statement per claim): `sql(lock)`
 * must select the `lock` expression as its `ok` column in a first step the rest depends on (a MATERIALIZED CTE),
 * change nothing unless it is true, and return at least one row. The lock's key is appended to `params`.
 */
export interface LockStatement {
  sql: (lock: string) => string;
  params: unknown[];
}

/** A session lock this replica holds. */
export interface HeldLock {
  readonly fence: Fence;
  /** The rows of the {@link LockStatement}, when it ran (a lock taken again or shared runs none). */
  readonly rows?: Record<string, unknown>[];
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

/** A lock held here: its connection and how many holds of this replica share it. */
interface HeldEntry {
  conn: LaneConnection;
  holds: number;
  /** Its last statement (see {@link SessionLocks.beginGiveBack}) is under way. */
  closing?: boolean;
}

/**
 * Per-session ownership in cluster mode: a session runs on a replica only while one of its dedicated lane
 * connections holds `pg_advisory_lock(hashtextextended(key, 0))`. Holds of one key on this replica share the
 * lock (turns of a key are already ordered by the local lanes). The last hold gives the lock back: with a
 * statement of its own, or inside the work queue's done mark ({@link SessionLocks.beginGiveBack}), which saves that
 * statement as locks kept with idle connections once did, without keeping a session from other replicas.
 */
export class SessionLocks {
  private readonly idle: LaneConnection[] = [];
  private readonly held = new Map<string, HeldEntry>();
  /** Keys whose lock is being given back by a last statement: taking one waits for its outcome first. */
  private readonly unlocking = new Map<string, Promise<unknown>>();
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
  tryAcquire(key: string, then?: LockStatement): Promise<HeldLock | undefined> {
    return this.acquire(key, 0, then);
  }

  /**
   * Takes `key`'s lock, waiting up to `waitMs` for another replica to release it (0: do not wait).
   * Resolves `undefined` when it stays taken.
   */
  async acquire(key: string, waitMs: number, then?: LockStatement): Promise<HeldLock | undefined> {
    for (let giving = this.unlocking.get(key); giving; giving = this.unlocking.get(key)) await giving;
    const mine = this.held.get(key);
    if (mine?.conn.alive) {
      mine.holds++;
      return this.hold(key, mine, false);
    }
    const conn = await this.connection();
    try {
      let ok: boolean;
      let rows: Record<string, unknown>[] | undefined;
      if (waitMs <= 0 && then) {
        // The caller's statement takes the lock in its own first step.
        rows = (await conn.client.query<Record<string, unknown>>(then.sql(`pg_try_advisory_lock(hashtextextended($${then.params.length + 1}, 0))`), [...then.params, key])).rows;
        ok = rows[0]?.ok === true;
      } else if (waitMs <= 0) {
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
        return { ...this.hold(key, raced, false), ...(rows ? { rows } : {}) };
      }
      if (!ok) {
        this.giveBack(conn);
        return undefined;
      }
      return { ...this.take(key, conn, true), ...(rows ? { rows } : {}) };
    } catch (error) {
      // A lock statement that failed may have taken the lock: the connection goes (and the lock with it).
      if (then) { conn.alive = false; void conn.close(); }
      this.giveBack(conn);
      throw error;
    }
  }

  private take(key: string, conn: LaneConnection, fresh: boolean): HeldLock {
    const entry: HeldEntry = { conn, holds: 1 };
    conn.key = key;
    conn.onLost = () => {
      if (this.held.get(key) === entry) this.held.delete(key);
      this.options.onLost?.(key);
    };
    this.held.set(key, entry);
    return this.hold(key, entry, fresh);
  }

  /**
   * For the last statement of a key's holds here (the queue's done mark when no message follows): returns a
   * callback to call with whether that statement gave the lock back itself (one statement saved per turn);
   * meanwhile a new hold of the key waits for the outcome, and once given back it takes the lock afresh. While a
   * claim drains a key, its jobs run under the claim's hold and the key's lane runs one task at a time, so nothing
   * else of the replica runs under the lock after that statement.
   */
  beginGiveBack(key: string): ((unlocked: boolean) => void) | undefined {
    const entry = this.held.get(key);
    if (!entry || entry.closing || !entry.conn.alive || this.closed) return undefined;
    entry.closing = true;
    let settle!: () => void;
    this.unlocking.set(key, new Promise<void>((resolve) => { settle = resolve; }));
    return (unlocked) => {
      entry.closing = false;
      if (unlocked && this.held.get(key) === entry) {
        // The holds still open end without a statement; their connection keeps no lock.
        this.held.delete(key);
        entry.conn.onLost = undefined;
        entry.conn.key = '';
      }
      this.unlocking.delete(key);
      settle();
    };
  }

  private hold(key: string, entry: HeldEntry, fresh: boolean): HeldLock {
    let released = false;
    const conn = entry.conn;
    return {
      fence: conn,
      fresh,
      release: async () => {
        if (released) return;
        released = true;
        if (--entry.holds > 0) return;
        const holding = this.held.get(key) === entry;
        if (holding) this.held.delete(key);
        conn.onLost = undefined;
        conn.key = '';
        // Lost with its connection, or given back by its last statement: the connection goes back once, no statement.
        if (!holding) { this.giveBack(conn); return; }
        // A connection that does not answer the unlock within a second is ended (its lock goes with it).
        if (conn.alive) {
          const answered = await Promise.race([
            conn.client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]).then(() => true, () => false),
            new Promise<false>((resolve) => { setTimeout(() => resolve(false), 1000).unref(); }),
          ]);
          if (!answered) conn.markLost();
        }
        this.giveBack(conn);
      },
    };
  }

  /** An idle connection, else a new one, else waits for one. */
  private async connection(): Promise<LaneConnection> {
    for (;;) {
      if (this.closed) throw new Error('session locks are closed');
      const conn = this.idle.pop();
      if (conn) {
        if (conn.alive) return conn;
        this.opened--;
        continue;
      }
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
