import type { Logger } from './logger.ts';
import { currentLogContext } from './log-context.ts';
import { scrubSecrets } from './secrets.ts';

/** What the guard has seen since it was installed (tests and `/status` may read it). */
export interface ProcessGuardStats {
  uncaughtExceptions: number;
  unhandledRejections: number;
}

const loggers: Logger[] = [];
/** Secret values given at install, per logger (for the line written when no logger can write it). */
const secretLists: (readonly string[])[] = [];
export const processGuardStats: ProcessGuardStats = { uncaughtExceptions: 0, unhandledRejections: 0 };

/** The text of anything, never throwing (a null-prototype object, a throwing `message` getter). */
function safeText(read: () => unknown, fallback: string): string {
  try {
    const value = read();
    return typeof value === 'string' ? value : String(value);
  } catch {
    return fallback;
  }
}

function messageOf(error: unknown): string {
  return safeText(() => (error instanceof Error ? error.message : String(error)), '[an unprintable value]');
}

/** Environment variables that hold secrets by name (tokens, keys, signing secrets, passwords). */
const SECRET_ENV = /TOKEN|SECRET|KEY|PASSWORD|CREDENTIAL/i;
/** Token shapes of the platforms and providers, scrubbed even when their values are not known here. */
const TOKEN_SHAPES = [
  /\b\d{5,}:[A-Za-z0-9_-]{30,}/g, // Telegram bot token
  /\bx(?:ox[abposr]|app)-[A-Za-z0-9-]{10,}/g, // Slack
  /\bsk-[A-Za-z0-9_-]{16,}/g, // OpenAI-style keys
  /\b[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{20,}/g, // Discord bot token, JWTs
  /\b(Bearer|Bot)\s+[A-Za-z0-9._~+/-]{12,}=*/g,
  /(?<=\/\/)[^/\s:@]+:[^/\s@]+(?=@)/g, // credentials in a URL
];

/** Scrubs a line written without a logger: known secrets, secret-named env values, token shapes. */
function scrubFallback(text: string): string {
  const envSecrets = Object.entries(process.env).filter(([name, value]) => SECRET_ENV.test(name) && value && value.length >= 6).map(([, value]) => value!);
  let out = scrubSecrets(text, [...secretLists.flat(), ...envSecrets]);
  for (const shape of TOKEN_SHAPES) out = out.replace(shape, '[redacted]');
  return out;
}

type GuardKind = 'uncaught exception' | 'unhandled rejection';

function lineOf(kind: GuardKind, channel: string | undefined, error: unknown): string {
  return `${kind}${channel ? ` in channel ${channel}` : ''}: ${messageOf(error)}; the gateway keeps serving`;
}

function report(kind: GuardKind, error: unknown): void {
  if (kind === 'uncaught exception') processGuardStats.uncaughtExceptions++;
  else processGuardStats.unhandledRejections++;
  // This runs inside Node's last handlers: anything thrown here would end the process after all.
  let context: ReturnType<typeof currentLogContext> = {};
  try {
    context = currentLogContext() ?? {};
    const logger = loggers[loggers.length - 1];
    if (logger) {
      logger.error({ err: error, ...context, guard: kind }, lineOf(kind, context.channel, error));
      return;
    }
  } catch {
    // The logger could not write it (an error whose fields throw when read): the line below still is.
  }
  try {
    const stack = safeText(() => (error instanceof Error && error.stack) || messageOf(error), '[an unprintable value]');
    process.stderr.write(`${JSON.stringify({ level: 50, msg: scrubFallback(lineOf(kind, context.channel, error)), ...context, guard: kind, error: scrubFallback(stack) })}\n`);
  } catch {
    // Nothing is left to write with.
  }
}

const onException = (error: unknown) => report('uncaught exception', error);
const onRejection = (reason: unknown) => report('unhandled rejection', reason);

/**
 * The last line of defence: an exception or a rejected promise that no channel, turn or route caught is
 * logged (error level, with the channel, account and correlation id of the work it came from when
 * known, see `runWithLogContext`) and the process keeps serving, instead of Node's default of exiting.
 * Every channel and route catches its own errors; reaching this is a bug worth its log line. When the
 * logger cannot write the line (or none is left), it goes to stderr, scrubbed of `secrets`, of the values
 * of secret-named environment variables and of token-shaped strings. Returns the function that uninstalls
 * it (the handlers stay while any gateway of the process runs).
 */
export function installProcessGuard(logger: Logger, secrets: readonly string[] = []): () => void {
  if (loggers.length === 0) {
    process.on('uncaughtException', onException);
    process.on('unhandledRejection', onRejection);
  }
  loggers.push(logger);
  secretLists.push(secrets.filter((s) => s.length >= 6));
  let installed = true;
  return () => {
    if (!installed) return;
    installed = false;
    const i = loggers.lastIndexOf(logger);
    if (i >= 0) {
      loggers.splice(i, 1);
      secretLists.splice(i, 1);
    }
    if (loggers.length === 0) {
      process.off('uncaughtException', onException);
      process.off('unhandledRejection', onRejection);
    }
  };
}
