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
  return options.destination ? pino(config, options.destination as never) : pino(config);
}

/** A logger that writes nothing. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
