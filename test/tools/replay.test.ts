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

  it('a recorded message found behind a long tool loop (over 500 entries) is not appended again', async () => {
    h = await startHarness();
    const at = () => new Date(h!.clock.now()).toISOString();
    const loop: TranscriptMessage[] = [{ type: 'message', id: randomUUID(), role: 'user', content: 'dig deep', at: at(), sourceId: 'telegram:default:u-20' }];
    for (let i = 0; i < 260; i++) {
      loop.push({ type: 'message', id: randomUUID(), role: 'assistant', content: '', toolCalls: [{ id: `d${i}`, name: 'memory_search', arguments: '{"query":"x"}' }], at: at() });
      loop.push({ type: 'message', id: randomUUID(), role: 'tool', content: 'no notes', toolCallId: `d${i}`, at: at() });
    }
    await run(telegramMessage(h, '1', 'earlier'));
    await h.runtime.appendEntries(h.session(), loop);
    const result = await run(telegramMessage(h, '20', 'dig deep'), true);
    expect(result.replies[0]!.text).toBe('ok');
    expect(messages(h).filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['earlier', 'dig deep']);
  });

  it('a replayed message a later turn already took up (a start-up resume answered it) is not run again and sends nothing', async () => {
    h = await startHarness();
    const at = () => new Date(h!.clock.now()).toISOString();
    await run(telegramMessage(h, '1', 'earlier'));
    await h.runtime.appendEntries(h.session(), [
      { type: 'message', id: randomUUID(), role: 'user', content: 'count them', at: at(), sourceId: 'telegram:default:u-30' },
      { type: 'message', id: randomUUID(), role: 'user', content: '[background_auto_resume] go on', at: at(), sourceId: 'internal:default:r1' },
      { type: 'message', id: randomUUID(), role: 'assistant', content: 'there are 3', at: at() },
    ]);
    const requests = h.fake.requests.length;
    const again = await run(telegramMessage(h, '30', 'count them'), true);
    expect(again.replies).toEqual([]);
    expect(h.fake.requests.length).toBe(requests);
    expect(messages(h).map((m) => m.content)).toEqual(['earlier', 'ok', 'count them', '[background_auto_resume] go on', 'there are 3']);
  });

  it('a replayed reset trigger does not reset the session a second time (with a first message and alone)', async () => {
    h = await startHarness();
    await run(telegramMessage(h, '1', 'before'));
    const withText = telegramMessage(h, '40', '/new hello');
    expect((await run(withText)).replies[0]!.text).toBe('ok');
    const sessionId = h.session().entry.sessionId;
    const requests = h.fake.requests.length;
    expect((await run(withText, true)).replies.map((r) => r.text)).toEqual(['ok']);
    expect(h.session().entry.sessionId).toBe(sessionId);
    expect(h.fake.requests.length).toBe(requests);
    expect(messages(h).map((m) => m.content)).toEqual(['hello', 'ok']);

    const alone = telegramMessage(h, '41', '/new');
    await run(alone);
    const fresh = h.session().entry.sessionId;
    expect(fresh).not.toBe(sessionId);
    expect((await run(alone, true)).replies[0]!.text).toMatch(/^New session started/);
    expect(h.session().entry.sessionId).toBe(fresh);
    // Not replayed, the trigger resets as usual.
    await run(telegramMessage(h, '42', '/new'));
    expect(h.session().entry.sessionId).not.toBe(fresh);
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
