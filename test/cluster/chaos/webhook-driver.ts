import { createHmac } from 'node:crypto';
import { SECRET_HEADER, webhookPath } from '../../../channels/telegram/webhook-route.ts';

/** One message the driver delivered and had acknowledged (200). */
export interface AckedUpdate {
  platform: 'telegram' | 'slack';
  chat: number;
  /** Position in the chat (0-based): the send order. */
  index: number;
  /** The gateway's delivery key of it (`<channel>:<account>:<update_id or event_id>`). */
  deliveryKey: string;
  text: string;
  /** Epoch ms of the first attempt and of the 200. */
  firstSentAt: number;
  ackedAt: number;
  /** Attempts it took (1 = the first was acknowledged). */
  attempts: number;
}

/** How one platform delivers a chat's message to a webhook. */
export interface WebhookPlatform {
  name: 'telegram' | 'slack';
  /** Path on the gateway. */
  path: string;
  /** The platform's own timeout: an answer not back by then counts as failed. */
  timeoutMs: number;
  /** A message's body (the same for every attempt) and its delivery key. */
  message(chat: number, index: number, text: string): { body: string; deliveryKey: string };
  /** Headers of an attempt (1-based), given why the previous one failed. */
  headers(body: string, attempt: number, lastFailure: string | undefined): Record<string, string>;
}

/** Options of {@link driveWebhooks}. */
export interface WebhookDriverOptions {
  platform: WebhookPlatform;
  /** The chat numbers this platform drives. */
  chats: number[];
  messagesPerChat: number;
  /** The replicas' base URLs at this moment (a restarted replica has a new port). */
  targets: () => string[];
  /** Requests in flight at once over all chats (Telegram's `max_connections`, 40 by default). */
  maxConnections: number;
  /** Pause after a 200 before the chat's next message: spreads the load over the run. */
  thinkMs: (chat: number, index: number) => number;
  /** Called after each acknowledgement (for progress-triggered faults). */
  onAck?: () => void;
  /** The text of a message (default {@link messageText}). */
  text?: (chat: number, index: number) => string;
}

/** What the driver did. */
export interface WebhookDriveResult {
  acked: AckedUpdate[];
  /** Attempts answered otherwise than 200: connection errors, 5xx, timeouts, by kind. */
  failures: Record<string, number>;
  /** The most attempts one message needed. */
  maxAttempts: number;
}

/** The text of a chat's message: the harness reads the chat and position back from it. */
export const messageText = (chat: number, index: number): string => `c${chat} m${index}`;

/** `c<chat> m<index>` back to numbers, from a message or a reply (`re: …`). */
export function parseText(text: string): { chat: number; index: number } | undefined {
  const m = /c(\d+) m(\d+)/.exec(text);
  return m ? { chat: Number(m[1]), index: Number(m[2]) } : undefined;
}

/** The first Telegram chat id; a chat's user has the same id (private chats). */
export const CHAT_BASE = 700_000;

let nextUpdateId = 1;

/** A Telegram photo (the largest size only, as the fake serves it through getFile). */
export interface TelegramPhoto { fileId: string; width: number; height: number; size: number }

/**
 * Telegram webhooks: `update_id` and the secret header; a failed update is sent again as it was. A message
 * `photoOf` gives a photo for is a photo with the text as its caption.
 */
export function telegramPlatform(secret: string, accountId = 'default', photoOf?: (chat: number, index: number) => TelegramPhoto | undefined): WebhookPlatform {
  // Telegram numbers a chat's messages 1, 2, 3, …, never twice (a driver may start a chat's indexes over).
  const messageIds = new Map<number, number>();
  return {
    name: 'telegram', path: webhookPath(accountId), timeoutMs: 4000,
    message(chat, index, text) {
      const chatId = CHAT_BASE + chat;
      const updateId = nextUpdateId++;
      const messageId = (messageIds.get(chat) ?? 0) + 1;
      messageIds.set(chat, messageId);
      const from = { id: chatId, is_bot: false, first_name: `U${chat}` };
      const photo = photoOf?.(chat, index);
      const content = photo
        ? { caption: text, photo: [{ file_id: photo.fileId, file_unique_id: `u${photo.fileId}`, width: photo.width, height: photo.height, file_size: photo.size }] }
        : { text };
      const body = JSON.stringify({
        update_id: updateId,
        message: { message_id: messageId, date: Math.floor(Date.now() / 1000), chat: { id: chatId, type: 'private', first_name: from.first_name }, from, ...content },
      });
      return { body, deliveryKey: `telegram:${accountId}:${updateId}` };
    },
    headers: () => ({ 'content-type': 'application/json', [SECRET_HEADER]: secret }),
  };
}

let nextEventId = 1;

/** Slack Events API over HTTP: signed bodies, the same `event_id` retried with `X-Slack-Retry-Num` (Slack's 3 s timeout). */
export function slackPlatform(signingSecret: string, accountId = 'default'): WebhookPlatform {
  return {
    name: 'slack', path: `/webhooks/slack/${accountId}`, timeoutMs: 3000,
    message(chat, index, text) {
      const eventId = `EvCHAOS${String(nextEventId++).padStart(7, '0')}`;
      const ts = `${1_700_000_000 + chat * 100 + index}.000100`;
      const body = JSON.stringify({
        token: 'legacy', team_id: 'T1', api_app_id: 'A1', type: 'event_callback', event_id: eventId, event_time: Math.floor(Date.now() / 1000),
        event: { type: 'message', channel_type: 'im', channel: `D${chat}`, user: `U${chat}`, text, ts, team: 'T1' },
        authorizations: [{ enterprise_id: null, team_id: 'T1', user_id: 'UBOT', is_bot: true, is_enterprise_install: false }],
      });
      return { body, deliveryKey: `slack:${accountId}:${eventId}` };
    },
    headers(body, attempt, lastFailure) {
      const timestamp = String(Math.floor(Date.now() / 1000));
      const signature = `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
      return {
        'content-type': 'application/json', 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature,
        ...(attempt > 1 ? { 'x-slack-retry-num': String(attempt - 1), 'x-slack-retry-reason': lastFailure === 'timeout' ? 'http_timeout' : 'http_error' } : {}),
      };
    },
  };
}

/**
 * Plays a platform's webhook delivery: each chat's messages one after another, the next only after a 200; a
 * connection error, a non-200 answer or a timeout sends the same message (same id) again to another replica.
 * Resolves when every message was acknowledged.
 */
export async function driveWebhooks(options: WebhookDriverOptions): Promise<WebhookDriveResult> {
  const { platform } = options;
  const acked: AckedUpdate[] = [];
  const failures: Record<string, number> = {};
  let maxAttempts = 0;
  let slots = options.maxConnections;
  const waiting: (() => void)[] = [];
  const take = async () => {
    while (slots === 0) await new Promise<void>((resolve) => waiting.push(resolve));
    slots--;
  };
  const give = () => { slots++; waiting.shift()?.(); };
  const fail = (kind: string) => { failures[kind] = (failures[kind] ?? 0) + 1; };

  const deliver = async (chat: number, index: number): Promise<void> => {
    const text = (options.text ?? messageText)(chat, index);
    const { body, deliveryKey } = platform.message(chat, index, text);
    const firstSentAt = Date.now();
    let lastFailure: string | undefined;
    for (let attempt = 1; ; attempt++) {
      const targets = options.targets();
      const url = targets[(chat + attempt - 1) % Math.max(1, targets.length)];
      let status = 0;
      await take();
      try {
        if (!url) throw new Error('no replica');
        const response = await fetch(`${url}${platform.path}`, {
          method: 'POST', body, signal: AbortSignal.timeout(platform.timeoutMs), headers: platform.headers(body, attempt, lastFailure),
        });
        status = response.status;
        await response.arrayBuffer();
      } catch (error) {
        lastFailure = (error as Error).name === 'TimeoutError' ? 'timeout' : 'connection';
        fail(lastFailure);
      } finally {
        give();
      }
      if (status === 200) {
        acked.push({ platform: platform.name, chat, index, deliveryKey, text, firstSentAt, ackedAt: Date.now(), attempts: attempt });
        maxAttempts = Math.max(maxAttempts, attempt);
        options.onAck?.();
        return;
      }
      if (status) { lastFailure = String(status); fail(lastFailure); }
      // The next replica at once; a short pause when every one failed in a row (all down or frozen).
      if (attempt % Math.max(1, targets.length) === 0) await new Promise((r) => setTimeout(r, 200));
    }
  };

  await Promise.all(options.chats.map(async (chat) => {
    for (let index = 0; index < options.messagesPerChat; index++) {
      const think = options.thinkMs(chat, index);
      if (think > 0) await new Promise((r) => setTimeout(r, think));
      await deliver(chat, index);
    }
  }));
  return { acked, failures, maxAttempts };
}
