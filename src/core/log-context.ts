import { AsyncLocalStorage } from 'node:async_hooks';

/** What is known about the work being done: which channel, which account, which turn. */
export interface LogContext {
  channel?: string;
  accountId?: string;
  correlationId?: string;
}

const storage = new AsyncLocalStorage<LogContext>();

/**
 * Runs `fn` (and everything it schedules: promises, timers, callbacks) with this context, so that an error
 * nobody catches can still be logged with its channel and correlation id ({@link currentLogContext}).
 */
export function runWithLogContext<T>(context: LogContext, fn: () => T): T {
  const outer = storage.getStore();
  return storage.run(outer ? { ...outer, ...context } : context, fn);
}

/** The context of the code running now, if any. */
export function currentLogContext(): LogContext | undefined {
  return storage.getStore();
}
