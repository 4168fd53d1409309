import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A minimal Telegram Bot API for the cluster bench: answers what the channel calls, reports each reply at once. */
export interface FakeBotApi {
  token: string;
  apiRoot: string;
  /** Called with the chat id and text of every `sendMessage`, when it arrives. */
  onSend: (chatId: number, text: string) => void;
  close(): Promise<void>;
}

/** Starts it on 127.0.0.1 (a port of its own). */
export async function startFakeBotApi(): Promise<FakeBotApi> {
  const token = '123456:BENCH-token_abcdefghij';
  const bot = { id: 9001, is_bot: true, first_name: 'Switchboard Bench', username: 'switchboard_bench_bot' };
  let messageId = 1;
  const api: FakeBotApi = { token, apiRoot: '', onSend: () => undefined, close: async () => undefined };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const method = /\/bot[^/]+\/(\w+)$/.exec(req.url ?? '')?.[1] ?? '';
      let body: Record<string, unknown> = {};
      try { body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as Record<string, unknown>; } catch { /* empty */ }
      let result: unknown = true;
      if (method === 'getMe') result = { ...bot, can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false };
      else if (method === 'getWebhookInfo') result = { url: '', has_custom_certificate: false, pending_update_count: 0 };
      else if (method === 'sendMessage') {
        const chatId = Number(body.chat_id);
        api.onSend(chatId, typeof body.text === 'string' ? body.text : '');
        result = { message_id: messageId++, date: Math.floor(Date.now() / 1000), from: bot, chat: { id: chatId, type: 'private' }, text: body.text };
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, result }));
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  api.apiRoot = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  api.close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return api;
}
