import { AsyncLocalStorage } from 'node:async_hooks';
import type pg from 'pg';
import { LeaseLostError } from '../core/errors.ts';

/** The lock a turn runs under: writes of its session go through `client`, so they fail once the lock is gone. */
export interface Fence {
  readonly key: string;
  readonly client: pg.Client;
  /** False once the connection ended: the lock is gone with it. */
  readonly alive: boolean;
  /** Records that the connection is unusable (a statement on it failed that way): the lock counts as gone. */
  markLost(): void;
}

const current = new AsyncLocalStorage<Fence>();

/** Runs `work` with `fence` as the current one: the stores of this turn write through its connection. */
export function runFenced<T>(fence: Fence, work: () => Promise<T>): Promise<T> {
  return current.run(fence, work);
}

/**
 * The connection to write `key`'s rows through: the fence's, when the running code holds that session's
 * lock; `undefined` otherwise (a write outside any turn of that session, made through the shared pool).
 * Throws {@link LeaseLostError} when the code holds the lock no more.
 */
export function fencedClient(key: string): pg.Client | undefined {
  const fence = current.getStore();
  if (!fence || fence.key !== key) return undefined;
  if (!fence.alive) throw new LeaseLostError(key);
  return fence.client;
}

/** The fence of the running code, if any. */
export function currentFence(): Fence | undefined {
  return current.getStore();
}
