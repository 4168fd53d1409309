import { GrammyError } from 'grammy';
import type { TelegramAccountConfig } from '../../src/config/resolved.ts';
import { ChannelError } from '../../src/core/errors.ts';

/** Where the user sets this account's token, for error messages. */
export function tokenSetting(account: TelegramAccountConfig): string {
  return account.accountId === 'default' ? 'TELEGRAM_BOT_TOKEN' : `channels.telegram.accounts.${account.accountId}.botToken`;
}

/** The Bot API root in use, for error messages. */
export function apiRootOf(account: TelegramAccountConfig): string {
  return account.apiRoot || 'https://api.telegram.org';
}

/** Replaces the bot token wherever it appears (request URLs in network errors carry it). */
export function withoutToken(text: string, token: string): string {
  return token ? text.split(token).join('<token>') : text;
}

/**
 * One clear line for a channel that could not start or stopped polling: what went wrong and what to do.
 * Never contains the token.
 */
export function telegramStartError(error: unknown, account: TelegramAccountConfig, timeoutMs?: number): ChannelError {
  if (error instanceof ChannelError) return error;
  const setting = tokenSetting(account);
  const where = account.accountId === 'default' ? 'in .env' : 'in the config';
  if (error instanceof GrammyError) {
    const code = error.error_code;
    if (code === 401 || code === 404) {
      return new ChannelError('TELEGRAM_TOKEN_REJECTED', `Telegram rejected ${setting} (${code}): create a bot with @BotFather and put its token ${where}`);
    }
    if (code === 409) {
      return new ChannelError('TELEGRAM_CONFLICT', `Telegram refused polling for ${setting} (409): another process is already polling this bot, or a webhook is set; stop the other process or use mode "webhook".`);
    }
    return new ChannelError('TELEGRAM_START_FAILED', `Telegram answered ${code} (${withoutToken(error.description, account.botToken)}) when checking ${setting}; check the token and TELEGRAM_API_ROOT.`);
  }
  if (isTimeout(error)) {
    const after = timeoutMs === undefined ? '' : ` after ${timeoutMs >= 1000 ? `${Math.round(timeoutMs / 1000)} s` : `${timeoutMs} ms`}`;
    return new ChannelError('TELEGRAM_UNREACHABLE', `The Telegram Bot API at ${apiRootOf(account)} timed out${after}: check the network, or TELEGRAM_API_ROOT if you set it.`);
  }
  const reason = error instanceof Error ? withoutToken(error.name === 'HttpError' ? describeCause(error) : error.message, account.botToken) : 'unknown error';
  return new ChannelError('TELEGRAM_UNREACHABLE', `Could not reach the Telegram Bot API at ${apiRootOf(account)} (${reason}): check the network, or TELEGRAM_API_ROOT if you set it.`);
}

function describeCause(error: Error): string {
  const cause = (error as { error?: unknown }).error;
  const code = (cause as { code?: string } | undefined)?.code;
  if (code) return code;
  return cause instanceof Error ? cause.message : error.message;
}

/** A request cut short by the start-up timeout (grammy reports the aborted fetch as an AbortError inside its HttpError). */
function isTimeout(error: unknown): boolean {
  const cause = (error as { error?: unknown } | undefined)?.error ?? error;
  const name = (cause as { name?: unknown } | undefined)?.name;
  return name === 'TimeoutError' || name === 'AbortError';
}
