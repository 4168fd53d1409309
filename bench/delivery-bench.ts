// Delivery under a flaky Bot API (SPEC §16): messages through the whole gateway (offline provider, the real
// Telegram channel) against a fake Bot API that cuts one send in three (seeded), before reading it. Counts
// the replies lost (never answered) and duplicated (answered twice), and what the retries cost.
import { startFakeTelegram } from '../test/fakes/fake-telegram.ts';
import { dm } from '../test/channels/telegram/updates.ts';
import { startTestGateway, tempDir } from '../test/helpers/gateway.ts';
import { prng } from './prng.ts';

/** What {@link runDeliveryBench} measured. */
export interface DeliveryBenchResult {
  messages: number;
  resetShare: number;
  sendsCut: number;
  lost: number;
  duplicated: number;
  givenUp: number;
  seconds: number;
}

/** Runs `messages` messages from `users` users; one send in three is cut (`resetShare`). */
export async function runDeliveryBench(options: { messages: number; users: number; resetShare?: number; retryBaseMs?: number }): Promise<DeliveryBenchResult> {
  const resetShare = options.resetShare ?? 1 / 3;
  const telegram = await startFakeTelegram();
  const tmp = tempDir('switchboard-delivery-bench-');
  const random = prng(2026);
  telegram.resetConnection = (method) => method === 'sendMessage' && random() < resetShare;
  // Backoff shortened from the production 500 ms so the run takes seconds; the attempts (8) are the default.
  const gw = await startTestGateway({
    dir: tmp.dir, env: { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot },
    config: { channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer' }, delivery: { retryBaseMs: options.retryBaseMs ?? 10, retryMaxMs: 200 } },
  });
  const started = Date.now();
  try {
    const texts: string[] = [];
    for (let i = 0; i < options.messages; i++) {
      const user = i % options.users;
      const text = `bench message ${i}`;
      texts.push(text);
      telegram.pushUpdate(dm(text, { from: { id: 10_000 + user, is_bot: false, first_name: `User ${user}` } }));
    }
    const answers = () => {
      const counts = new Map<string, number>();
      for (const call of telegram.callsOf('sendMessage')) {
        const m = /You said: "([^"]*)"/.exec(String(call.body.text));
        if (call.response.ok && m) counts.set(m[1]!, (counts.get(m[1]!) ?? 0) + 1);
      }
      return counts;
    };
    const givenUp = () => Object.values(gw.gateway.deliveryFailures().byChannel).reduce((a, b) => a + b, 0);
    const deadline = Date.now() + 600_000;
    while (Date.now() < deadline && answers().size + givenUp() < texts.length) await new Promise((r) => setTimeout(r, 50));
    const counts = answers();
    return {
      messages: texts.length, resetShare, sendsCut: telegram.resets,
      lost: texts.filter((t) => !counts.has(t)).length,
      duplicated: [...counts.values()].filter((n) => n > 1).length,
      givenUp: givenUp(),
      seconds: Math.round((Date.now() - started) / 100) / 10,
    };
  } finally {
    await gw.stop();
    await telegram.close();
    tmp.remove();
  }
}
