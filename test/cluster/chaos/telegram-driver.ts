import { SECRET_HEADER, webhookPath } from '../../../channels/telegram/webhook-route.ts';

/** One message the driver delivered and had acknowledged (200). */
export interface AckedUpdate {
  chat: number;
  /** Position in the chat (0-based): the send order. */
  index: number;
  updateId: number;
  text: string;
  /** Epoch ms of the first attempt and of the 200. */
  firstSentAt: number;
  ackedAt: number;
  /** Attempts it took (1 = the first was acknowledged). */
  attempts: number;
}

/** Options of {@link driveTelegram}. */
export interface TelegramDriverOptions {
  chats: number;
  messagesPerChat: number;
  /** The replicas' base URLs at this moment (a restarted replica has a new port). */
  targets: () => string[];
  secret: string;
  accountId?: string;
  /** Requests in flight at once over all chats (Telegram's `max_connections`, 40 by default). */
  maxConnections: number;
  /** A request not answered within this is abandoned and the update sent to another replica. */
  timeoutMs: number;
  /** Pause after a 200 before the chat's next message: spreads the load over the run. */
  thinkMs: (chat: number, index: number) => number;
  /** Called after each acknowledgement (for progress-triggered faults). */
  onAck?: (acked: number, total: number) => void;
}

/** What the driver did. */
export interface TelegramDriveResult {
  acked: AckedUpdate[];
  /** Attempts answered otherwise than 200: connection errors, 5xx, timeouts, by kind. */
  failures: Record<string, number>;
}

/** The text of a chat's message: the harness reads the chat and position back from it. */
export const messageText = (chat: number, index: number): string => `c${chat} m${index}`;

/** `c<chat> m<index>` back to numbers, from a message or a reply (`re: …`). */
export function parseText(text: string): { chat: number; index: number } | undefined {
  const m = /c(\d+) m(\d+)/.exec(text);
  return m ? { chat: Number(m[1]), index: Number(m[2]) } : undefined;
}

/** The first chat id; a chat's user has the same id (private chats). */
export const CHAT_BASE = 700_000;

/**
 * Plays Telegram's webhook delivery: each chat's updates one after another, the next only after a 200; a
 * connection error, a non-200 answer or a timeout sends the same update (same `update_id`) again to another
 * replica. Resolves when every update was acknowledged.
 */
export async function driveTelegram(options: TelegramDriverOptions): Promise<TelegramDriveResult> {
  const acked: AckedUpdate[] = [];
  const failures: Record<string, number> = {};
  const total = options.chats * options.messagesPerChat;
  const path = webhookPath(options.accountId ?? 'default');
  let slots = options.maxConnections;
  const waiting: (() => void)[] = [];
  const take = async () => {
    while (slots === 0) await new Promise<void>((resolve) => waiting.push(resolve));
    slots--;
  };
  const give = () => { slots++; waiting.shift()?.(); };
  let nextUpdateId = 1;
  const fail = (kind: string) => { failures[kind] = (failures[kind] ?? 0) + 1; };

  const deliver = async (chat: number, index: number, rotate: number): Promise<void> => {
    const chatId = CHAT_BASE + chat;
    const text = messageText(chat, index);
    const updateId = nextUpdateId++;
    const from = { id: chatId, is_bot: false, first_name: `U${chat}` };
    const body = JSON.stringify({
      update_id: updateId,
      message: { message_id: index + 1, date: Math.floor(Date.now() / 1000), chat: { id: chatId, type: 'private', first_name: from.first_name }, from, text },
    });
    const firstSentAt = Date.now();
    for (let attempt = 1; ; attempt++) {
      const targets = options.targets();
      const url = targets[(rotate + attempt - 1) % Math.max(1, targets.length)];
      let status = 0;
      await take();
      try {
        if (!url) throw new Error('no replica');
        const response = await fetch(`${url}${path}`, {
          method: 'POST', body, signal: AbortSignal.timeout(options.timeoutMs),
          headers: { 'content-type': 'application/json', [SECRET_HEADER]: options.secret },
        });
        status = response.status;
        await response.arrayBuffer();
      } catch (error) {
        fail((error as Error).name === 'TimeoutError' ? 'timeout' : 'connection');
      } finally {
        give();
      }
      if (status === 200) {
        acked.push({ chat, index, updateId, text, firstSentAt, ackedAt: Date.now(), attempts: attempt });
        options.onAck?.(acked.length, total);
        return;
      }
      if (status) fail(String(status));
      // The next replica at once; a short pause when every one failed in a row (all down or frozen).
      if (attempt % Math.max(1, targets.length) === 0) await new Promise((r) => setTimeout(r, 200));
    }
  };

  await Promise.all(Array.from({ length: options.chats }, async (_, chat) => {
    for (let index = 0; index < options.messagesPerChat; index++) {
      const think = options.thinkMs(chat, index);
      if (think > 0) await new Promise((r) => setTimeout(r, think));
      await deliver(chat, index, chat);
    }
  }));
  return { acked, failures };
}
