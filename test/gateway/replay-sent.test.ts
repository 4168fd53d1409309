import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { Inbox } from '../../src/gateway/inbox.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { sentTo, startTelegramGateway, telegramConfig } from '../channels/telegram/harness.ts';
import { dm } from '../channels/telegram/updates.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !condition(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!condition()) throw new Error('condition not met in time');
}

describe('replies of a replayed message', () => {
  let telegram: FakeTelegram;
  const openai = useFakeOpenAI();
  const tmp = useTempDir();
  let gw: RunningGateway | undefined;

  beforeEach(async () => {
    telegram = await startFakeTelegram();
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await telegram.close();
  });

  it('the journal records each reply the platform accepted; a replay sends only what it has not, without calling the model again', async () => {
    gw = await startTelegramGateway({ dir: tmp.dir, telegram, openai, config: telegramConfig() });
    telegram.pushUpdate(dm('hello there'));
    await until(() => sentTo(telegram, 42).length === 1);
    // The journal lines follow the send; wait for the last of them.
    await until(() => readFileSync(path.join(tmp.dir, 'data', 'inbox.jsonl'), 'utf8').includes('"op":"done"'));
    const journal = readFileSync(path.join(tmp.dir, 'data', 'inbox.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { op: string; count?: number });
    expect(journal.map((r) => r.op)).toEqual(['in', 'sent', 'done']);
    expect(journal[1]!.count).toBe(1);

    // As if the gateway had died after the send but before "done": the replay finds the answer in the transcript.
    const { message, correlationId } = (JSON.parse(readFileSync(path.join(tmp.dir, 'data', 'inbox.jsonl'), 'utf8').split('\n')[0]!) as { message: never; correlationId: string });
    const llmCalls = openai.requests.length;
    gw.gateway.replay([{ message, correlationId, sent: 1 }]);
    await until(() => gw!.gateway.lanes.runningCount === 0 && gw!.gateway.lanes.totalQueued() === 0);
    await new Promise((r) => setImmediate(r));
    expect(sentTo(telegram, 42)).toHaveLength(1);
    // Killed between the model's answer and the send: the recorded answer goes out once, still without a new LLM call.
    gw.gateway.replay([{ message, correlationId, sent: 0 }]);
    await until(() => sentTo(telegram, 42).length === 2);
    expect(sentTo(telegram, 42).map((c) => c.body.text)).toEqual(['echo: hello there', 'echo: hello there']);
    expect(openai.requests.length).toBe(llmCalls);
  });

  it('a reopened journal gives back how many replies a pending message had sent', async () => {
    const file = path.join(tmp.dir, 'inbox.jsonl');
    const clock = new ManualClock();
    const first = new Inbox({ file, clock, logger: silentLogger() });
    first.open();
    const message = { id: '1', deliveryId: 'u1', channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: '42', peerId: '42', sender: { id: '42' }, text: 'x', attachments: [], mentionsBot: true, receivedAt: 0 } as const;
    await first.accept({ ...message, attachments: [] }, 'c1');
    await first.sent({ ...message, attachments: [] }, 2);
    await first.close();
    const second = new Inbox({ file, clock, logger: silentLogger() });
    expect(second.open()).toEqual([expect.objectContaining({ correlationId: 'c1', sent: 2 })]);
    await second.close();
    // Compaction kept it.
    const third = new Inbox({ file, clock, logger: silentLogger() });
    expect(third.open()[0]!.sent).toBe(2);
    await third.close();
  });
});
