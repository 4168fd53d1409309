import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import sqlite3 from 'sqlite3';
import { StateLockedError, SwitchboardError } from './errors.ts';

/** Who owns a state folder, as written to `<stateDir>/gateway.json` next to the lock. */
export interface StateOwner {
  pid: number;
  /** `gateway` serves HTTP; `cli` is a command running the pipeline in-process (`switchboard chat` with no gateway). */
  role: 'gateway' | 'cli';
  /** What runs, for messages: `switchboard start`, `switchboard chat`... */
  command: string;
  /** `http://host:port` once a gateway listens. */
  url?: string;
  port?: number;
  startedAt: string;
}

/** Options of {@link StateLock.acquire}. */
export interface AcquireOptions {
  /** How long to wait for a lock held by a short CLI command before giving up (default 0: fail at once). */
  waitMs?: number;
  /** Pause between attempts while waiting (default 100 ms). */
  pollMs?: number;
}

/** The lock file (an SQLite database held in an exclusive transaction) and the owner file of a state folder. */
export function stateLockPaths(stateDir: string): { lock: string; owner: string } {
  return { lock: path.join(stateDir, 'gateway.lock'), owner: path.join(stateDir, 'gateway.json') };
}

/** The owner recorded in a state folder, if the file is there and readable (it may be stale: check the lock). */
export function readStateOwner(stateDir: string): StateOwner | undefined {
  try {
    const owner = JSON.parse(readFileSync(stateLockPaths(stateDir).owner, 'utf8')) as StateOwner;
    return typeof owner.pid === 'number' ? owner : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One owner per state folder (SPEC §13). The lock is an exclusive SQLite transaction on
 * `<stateDir>/gateway.lock`: the kernel drops it when the process ends in any way, `kill -9` included, so a
 * stale lock never needs guessing (no pid or mtime heuristics) and the next start takes it over at once.
 * The owner's pid, role and URL are in `gateway.json`, which names the running one when another start is
 * refused and tells the CLI where to send its requests.
 */
export class StateLock {
  readonly stateDir: string;
  private owner: StateOwner;
  private db: sqlite3.Database | undefined;

  private constructor(stateDir: string, db: sqlite3.Database, owner: StateOwner) {
    this.stateDir = stateDir;
    this.db = db;
    this.owner = owner;
  }

  /** Takes the lock or throws {@link StateLockedError} naming the owner. */
  static async acquire(stateDir: string, who: Pick<StateOwner, 'role' | 'command'>, options: AcquireOptions = {}): Promise<StateLock> {
    mkdirSync(stateDir, { recursive: true });
    const deadline = Date.now() + (options.waitMs ?? 0);
    for (;;) {
      const db = await tryLock(stateLockPaths(stateDir).lock);
      if (db) {
        const lock = new StateLock(stateDir, db, { pid: process.pid, ...who, startedAt: new Date().toISOString() });
        lock.writeOwner();
        return lock;
      }
      if (Date.now() >= deadline) throw new StateLockedError(stateDir, readStateOwner(stateDir));
      await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 100));
    }
  }

  /** True while some process holds the lock of `stateDir` (checked by trying it; released at once). */
  static async isHeld(stateDir: string): Promise<boolean> {
    if (!existsSync(stateLockPaths(stateDir).lock)) return false;
    const db = await tryLock(stateLockPaths(stateDir).lock);
    if (!db) return true;
    await closeDb(db);
    return false;
  }

  /** What the owner file says about this process. */
  get info(): StateOwner {
    return { ...this.owner };
  }

  /** Records more about the owner (the URL once the server listens). */
  update(fields: Partial<Pick<StateOwner, 'url' | 'port'>>): void {
    this.owner = { ...this.owner, ...fields };
    this.writeOwner();
  }

  /** Removes the owner file and lets the lock go. Idempotent. */
  async release(): Promise<void> {
    const db = this.db;
    if (!db) return;
    this.db = undefined;
    const { owner } = stateLockPaths(this.stateDir);
    if (readStateOwner(this.stateDir)?.pid === process.pid) rmSync(owner, { force: true });
    await closeDb(db);
  }

  private writeOwner(): void {
    const { owner } = stateLockPaths(this.stateDir);
    const tmp = `${owner}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(this.owner, null, 2)}\n`);
    renameSync(tmp, owner);
  }
}

/** Opens the lock database and takes an exclusive lock without waiting; undefined when another connection holds it. */
function tryLock(file: string): Promise<sqlite3.Database | undefined> {
  return new Promise((resolve, reject) => {
    const db = new sqlite3.Database(file, (openError) => {
      if (openError) {
        reject(new SwitchboardError('STATE_LOCK_FAILED', `Cannot open the state lock ${file}: ${openError.message}. Check that the state folder is writable.`, { cause: openError }));
        return;
      }
      db.configure('busyTimeout', 0);
      // locking_mode=EXCLUSIVE keeps the lock for the connection's life; the open transaction takes it now.
      db.exec('PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;', (lockError) => {
        if (!lockError) return resolve(db);
        db.close(() => {
          if ((lockError as { code?: string }).code === 'SQLITE_BUSY') resolve(undefined);
          else reject(new SwitchboardError('STATE_LOCK_FAILED', `Cannot lock ${file}: ${lockError.message}.`, { cause: lockError }));
        });
      });
    });
  });
}

function closeDb(db: sqlite3.Database): Promise<void> {
  return new Promise((resolve) => db.exec('ROLLBACK', () => db.close(() => resolve())));
}
