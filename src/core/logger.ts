import { pino, type Logger, type LoggerOptions } from 'pino';
import { scrubSecrets, scrubValue, serializeError } from './secrets.ts';

export type { Logger } from 'pino';

/** Paths that may carry secrets; pino replaces their values before a line is written. */
export const REDACTED_PATHS = [
  'apiKey', '*.apiKey', 'token', '*.token', 'botToken', '*.botToken', 'appToken', '*.appToken',
  'signingSecret', '*.signingSecret', 'authToken', '*.authToken', 'webhookSecret', '*.webhookSecret',
  'authorization', '*.authorization', 'headers.authorization', 'req.headers.authorization',
];

/** Options of {@link createLogger}. */
export interface LoggerSetup {
  level?: string;
  /** Where lines go (default stdout). */
  destination?: NodeJS.WritableStream;
  /** Secret values (tokens, keys) scrubbed from every line, also inside error messages and URLs. */
  secrets?: readonly string[];
}

/** Creates the process logger. */
export function createLogger(options: LoggerSetup = {}): Logger {
  const secrets = (options.secrets ?? []).filter((s) => s.length >= 6);
  const config: LoggerOptions = {
    level: options.level ?? 'info',
    base: { service: 'switchboard' },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: {
      err: (err: unknown) => (err instanceof Error ? serializeError(err, secrets) : scrubValue(err, secrets)),
    },
    // Errors under any key (not only `err`) keep message, stack, code and cause; secrets are scrubbed from every string.
    formatters: { log: (obj) => scrubValue(obj, secrets) as Record<string, unknown> },
  };
  if (secrets.length) {
    config.hooks = {
      logMethod(args, method) {
        const scrubbed = args.map((a) => (typeof a === 'string' ? scrubSecrets(a, secrets) : a)) as Parameters<typeof method>;
        method.apply(this, scrubbed);
      },
    };
  }
  return withLazyChildren(options.destination ? pino(config, options.destination as never) : pino(config));
}

/** A logger that writes nothing. */
export function silentLogger(): Logger {
  return withLazyChildren(pino({ level: 'silent' }));
}

const LEVEL_METHODS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const noop = (): void => undefined;
type ChildFn = (this: Logger, bindings: Record<string, unknown>, options?: object) => Logger;
/** pino's own `child` (on the prototype of every pino logger; {@link withLazyChildren} shadows it per instance). */
const pinoChild = (Object.getPrototypeOf(pino({ level: 'silent' })) as { child: ChildFn }).child;

/**
 * Makes `logger.child(bindings)` lazy: the gateway makes a child (correlation id, session key) for every
 * message, and pino serializes its bindings at once, while most turns log nothing through it. The child is
 * made the first time a line of an enabled level is written through it (or anything else is read of it);
 * a call of a level below the logger's level at the time of `child()` costs nothing, as in pino. A child with
 * options (its own level, serializers) is made at once.
 */
export function withLazyChildren(logger: Logger): Logger {
  logger.child = ((bindings: Record<string, unknown>, options?: object) => (options
    ? withLazyChildren(pinoChild.call(logger, bindings, options))
    : lazyChild(logger, () => withLazyChildren(pinoChild.call(logger, bindings))))) as unknown as Logger['child'];
  return logger;
}

function lazyChild(parent: Logger, make: () => Logger): Logger {
  const threshold = parent.levelVal;
  const values = parent.levels.values;
  let real: Logger | undefined;
  const bound = new Map<PropertyKey, unknown>();
  const materialize = (): Logger => (real ??= make());
  const read = (prop: PropertyKey): unknown => {
    const target = materialize();
    const value = Reflect.get(target, prop, target) as unknown;
    if (typeof value !== 'function') return value;
    let fn = bound.get(prop);
    if (!fn) {
      fn = (value as (...args: unknown[]) => unknown).bind(target);
      bound.set(prop, fn);
    }
    return fn;
  };
  const enabled = (level: string): boolean => {
    const value = values[level];
    return value !== undefined && value >= threshold;
  };
  return new Proxy({} as Logger, {
    get(_target, prop) {
      if (real || typeof prop !== 'string') return read(prop);
      if (LEVEL_METHODS.has(prop)) return enabled(prop) ? read(prop) : noop;
      if (prop === 'silent') return noop;
      if (prop === 'isLevelEnabled') return enabled;
      if (prop === 'child') {
        return (bindings: Record<string, unknown>, options?: object) => (options
          ? withLazyChildren(pinoChild.call(materialize(), bindings, options))
          : lazyChild(parent, () => withLazyChildren(pinoChild.call(materialize(), bindings))));
      }
      return read(prop);
    },
    set(_target, prop, value) {
      bound.delete(prop);
      return Reflect.set(materialize(), prop, value);
    },
    has(_target, prop) {
      return Reflect.has(materialize(), prop);
    },
    getPrototypeOf() {
      return Reflect.getPrototypeOf(materialize());
    },
  });
}
