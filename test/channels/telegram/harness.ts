import type { Logger } from '../../../src/core/logger.ts';
import type { RunningGateway } from '../../../src/main.ts';
import type { FakeOpenAI } from '../../fakes/fake-openai.ts';
import type { FakeTelegram } from '../../fakes/fake-telegram.ts';
import { startTestGateway } from '../../helpers/gateway.ts';

/** Starts the whole gateway with the real Telegram channel pointed at the fake Bot API. */
export function startTelegramGateway(options: {
  dir: string;
  telegram: FakeTelegram;
  openai?: FakeOpenAI;
  config?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  logger?: Logger;
  pollBackoff?: { baseMs?: number; maxMs?: number };
}): Promise<RunningGateway> {
  const llm = options.openai ? { OPENAI_BASE_URL: options.openai.baseURL, OPENAI_API_KEY: 'sk-test', OPENAI_MODEL: 'gpt-test' } : {};
  return startTestGateway({
    dir: options.dir,
    env: { TELEGRAM_BOT_TOKEN: options.telegram.token, TELEGRAM_API_ROOT: options.telegram.apiRoot, ...llm, ...options.env },
    config: options.config,
    logger: options.logger,
    ...(options.pollBackoff ? { pollBackoff: options.pollBackoff } : {}),
  });
}

/** Session keys listed by `GET /admin/sessions`. */
export async function sessionKeys(gw: RunningGateway): Promise<string[]> {
  const body = (await (await fetch(`${gw.url}/admin/sessions`)).json()) as { sessions: { key: string }[] };
  return body.sessions.map((s) => s.key).sort();
}

/** `sendMessage` calls to one chat. */
export function sentTo(telegram: FakeTelegram, chatId: number) {
  return telegram.callsOf('sendMessage').filter((c) => Number(c.body.chat_id) === chatId && c.response.ok);
}

/** Config: DMs open to everyone (no pairing) unless a test says otherwise. */
export function telegramConfig(telegram: Record<string, unknown> = {}, rest: Record<string, unknown> = {}): Record<string, unknown> {
  return { channels: { telegram: { dmPolicy: 'open', ...telegram } }, ...rest };
}
