import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { InboundMessage } from '../../src/core/message.ts';
import type { TranscriptMessage } from '../../src/sessions/transcript.ts';
import { startHarness, type Harness } from '../agent/harness.ts';

const telegramMessage = (h: Harness, id: string, text: string): InboundMessage => ({
  id, deliveryId: `u-${id}`, channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: '42', peerId: '42',
  sender: { id: '42', name: 'Alice' }, text, attachments: [], mentionsBot: true, receivedAt: h.clock.now(),
});
const messages = (h: Harness) => h.fileEntries().filter((e): e is TranscriptMessage => e.type === 'message');

describe('replaying a message after a crash or stop', () => {
  let h: Harness | undefined;
  afterEach(async () => { await h?.close(); h = undefined; });

  const run = (message: InboundMessage, replayed = false) =>
    h!.runtime.runTurn({ message, sessionKey: h!.key, correlationId: randomUUID(), signal: new AbortController().signal, replayed });

  it('an answered message replayed (killed before the journal said done) sends its recorded answer; the model is not called again', async () => {
    h = await startHarness();
    const message = telegramMessage(h, '7', 'hello');
    const first = await run(message);
    expect(first.replies[0]!.text).toBe('ok');
    const requests = h.fake.requests.length;
    const again = await run(message, true);
    expect(again.replies.map((r) => r.text)).toEqual(['ok']);
    expect(h.fake.requests.length).toBe(requests);
    expect(messages(h).map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages(h)[0]!.sourceId).toBe('telegram:default:u-7');
  });

  it('a message whose user entry was written before the crash continues from there instead of appending it again', async () => {
    h = await startHarness();
    const message = telegramMessage(h, '8', 'what time is it?');
    await run(telegramMessage(h, '1', 'earlier'));
    // The crash came right after the user entry: no answer yet.
    await h.runtime.appendEntries(h.session(), [{ type: 'message', id: randomUUID(), role: 'user', content: 'what time is it?', at: new Date(h.clock.now()).toISOString(), sourceId: 'telegram:default:u-8' }]);
    const result = await run(message, true);
    expect(result.replies[0]!.text).toBe('ok');
    expect(messages(h).map((m) => [m.role, m.content])).toEqual([['user', 'earlier'], ['assistant', 'ok'], ['user', 'what time is it?'], ['assistant', 'ok']]);
    // A fresh (not replayed) message with the same text is a new message.
    await run(telegramMessage(h, '9', 'what time is it?'));
    expect(messages(h).filter((m) => m.content === 'what time is it?')).toHaveLength(2);
  });

  it('the entry names a new transcript before the file exists, so a crash never leaves a transcript no entry points to', async () => {
    h = await startHarness();
    const store = (h.sessions as unknown as { options: { store: { entries: Map<string, { sessionId: string }> } } }).options.store;
    const create = h.transcripts.create.bind(h.transcripts);
    const seenAtCreate: (string | undefined)[] = [];
    h.transcripts.create = async (sessionId, key, at) => {
      seenAtCreate.push(store.entries.get(key)?.sessionId === sessionId ? sessionId : undefined);
      return create(sessionId, key, at);
    };
    await h.send('first');
    await h.send('/new');
    await h.send('second');
    expect(seenAtCreate).toHaveLength(2);
    expect(seenAtCreate.every(Boolean)).toBe(true);
    expect(existsSync(h.transcripts.pathOf(h.session().entry.sessionId))).toBe(true);
  });
});
