import { ChannelError } from '../../src/core/errors.ts';

/** Raised when the gateway does not become ready in time. */
export class DiscordStartTimeout extends Error {
  constructor(readonly ms: number) {
    super(`not ready after ${ms} ms`);
  }
}

/** Where the token of an account is configured, for messages. */
export function tokenSetting(accountId: string): string {
  return accountId === 'default' ? 'DISCORD_BOT_TOKEN (or channels.discord.token)' : `channels.discord.accounts.${accountId}.token`;
}

/**
 * One actionable line for a failed start: a rejected token, a privileged intent that is not enabled,
 * an unreachable API. The token never appears in it.
 */
export function startError(error: unknown, account: { accountId: string; token: string; apiBase: string }): ChannelError {
  const setting = tokenSetting(account.accountId);
  const code = (error as { code?: unknown } | undefined)?.code;
  const status = (error as { status?: unknown } | undefined)?.status;
  const message = scrub(error instanceof Error ? error.message : String(error), account.token);
  if (code === 'TokenInvalid' || code === 4004 || status === 401 || /authentication failed/i.test(message)) {
    return new ChannelError('DISCORD_TOKEN_REJECTED', `Discord rejected ${setting}: the bot token is wrong or was reset. Copy it again from the Developer Portal (your application → Bot → Reset Token).`, error);
  }
  if (/disallowed intents/i.test(message) || code === 4014) {
    return new ChannelError('DISCORD_INTENTS_DISALLOWED', 'Discord refused the Message Content intent: enable "Message Content Intent" in the Developer Portal (your application → Bot → Privileged Gateway Intents), then restart.', error);
  }
  const api = account.apiBase || 'https://discord.com/api';
  if (error instanceof DiscordStartTimeout) {
    return new ChannelError('DISCORD_START_TIMEOUT', `Discord did not become ready within ${error.ms >= 1000 ? `${Math.round(error.ms / 1000)} s` : `${error.ms} ms`} (API ${api}): check the network, DISCORD_API_BASE and ${setting}.`, error);
  }
  return new ChannelError('DISCORD_START_FAILED', `Discord could not start (API ${api}): ${message.split('\n')[0]}`, error);
}

function scrub(text: string, token: string): string {
  return token.length >= 6 ? text.split(token).join('[redacted]') : text;
}
