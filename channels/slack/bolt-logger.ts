import { LogLevel, type Logger as BoltLogger } from '@slack/bolt';
import type { Logger } from '../../src/core/logger.ts';

type Level = 'debug' | 'info' | 'warn' | 'error';

/**
 * Bolt's logger interface over the process's pino logger, so bolt, the Web API client and the Socket
 * Mode client write through the same secret scrubbing. Bolt's `info` lines are routine chatter and go
 * to `debug`.
 */
export function boltLogger(logger: Logger): BoltLogger {
  const write = (level: Level) => (...args: unknown[]) => {
    const err = args.find((a): a is Error => a instanceof Error);
    const text = args.filter((a) => !(a instanceof Error)).map(describe).join(' ');
    if (err) logger[level]({ err }, text || err.message);
    else logger[level](text);
  };
  return {
    debug: write('debug'),
    info: write('debug'),
    warn: write('warn'),
    error: write('error'),
    setLevel: () => undefined,
    getLevel: () => {
      switch (logger.level) {
        case 'trace':
        case 'debug': return LogLevel.DEBUG;
        case 'info': return LogLevel.INFO;
        case 'warn': return LogLevel.WARN;
        default: return LogLevel.ERROR;
      }
    },
    setName: () => undefined,
  };
}

function describe(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
