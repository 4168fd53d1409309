import type { Logger } from './logger.ts';
import { currentLogContext } from './log-context.ts';

/** What the guard has seen since it was installed (tests and `/status` may read it). */
export interface ProcessGuardStats {
  uncaughtExceptions: number;
  unhandledRejections: number;
}

const loggers: Logger[] = [];
export const processGuardStats: ProcessGuardStats = { uncaughtExceptions: 0, unhandledRejections: 0 };

function report(kind: 'uncaught exception' | 'unhandled rejection', error: unknown): void {
  if (kind === 'uncaught exception') processGuardStats.uncaughtExceptions++;
  else processGuardStats.unhandledRejections++;
  const context = currentLogContext() ?? {};
  const logger = loggers[loggers.length - 1];
  const fields = { err: error, ...context, guard: kind };
  const line = `${kind}${context.channel ? ` in channel ${context.channel}` : ''}: ${(error as Error)?.message ?? String(error)}; the gateway keeps serving`;
  if (logger) logger.error(fields, line);
  // No logger left (every gateway stopped): still never silent.
  else process.stderr.write(`${JSON.stringify({ level: 50, msg: line, error: String((error as Error)?.stack ?? error) })}\n`);
}

const onException = (error: unknown) => report('uncaught exception', error);
const onRejection = (reason: unknown) => report('unhandled rejection', reason);

/**
 * The last line of defence: an exception or a rejected promise that no channel, turn or route caught is
 * logged (error level, with the channel, account and correlation id of the work it came from when
 * known, see `runWithLogContext`) and the process keeps serving, instead of Node's default of exiting.
 * Every channel and route catches its own errors; reaching this is a bug worth its log line. Returns the
 * function that uninstalls it (the handlers stay while any gateway of the process runs).
 */
export function installProcessGuard(logger: Logger): () => void {
  if (loggers.length === 0) {
    process.on('uncaughtException', onException);
    process.on('unhandledRejection', onRejection);
  }
  loggers.push(logger);
  let installed = true;
  return () => {
    if (!installed) return;
    installed = false;
    const i = loggers.lastIndexOf(logger);
    if (i >= 0) loggers.splice(i, 1);
    if (loggers.length === 0) {
      process.off('uncaughtException', onException);
      process.off('unhandledRejection', onRejection);
    }
  };
}
