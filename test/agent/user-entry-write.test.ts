// The user's message waits for the turn's next transcript write (the answer, or a tool call) and goes in the same
// write: one statement per turn fewer in cluster mode. It must still be in the transcript whatever the turn does.
import { afterEach, expect, it } from 'vitest';
import type { TranscriptEntry } from '../../src/sessions/transcript.ts';
import { defaultReply, startHarness, type Harness } from './harness.ts';

let h: Harness | undefined;
afterEach(async () => { await h?.close(); h = undefined; });

/** The transcript's writes, as the roles (or types) of the entries each wrote. */
function recordWrites(harness: Harness): string[][] {
  const writes: string[][] = [];
  const append = harness.transcripts.append.bind(harness.transcripts);
  harness.transcripts.append = (sessionId: string, entries: TranscriptEntry | TranscriptEntry[]) => {
    writes.push((Array.isArray(entries) ? entries : [entries]).map((e) => (e.type === 'message' ? e.role : e.type)));
    return append(sessionId, entries);
  };
  return writes;
}

it('the user\'s message and the answer reach the transcript in one write, in order', async () => {
  h = await startHarness();
  await h.send('first');
  const writes = recordWrites(h);
  expect(await h.send('second')).toBe('ok');
  expect(writes).toEqual([['user', 'assistant']]);
  const messages = h.fileEntries().flatMap((e) => (e.type === 'message' ? [`${e.role}:${e.content}`] : []));
  expect(messages).toEqual(['user:first', 'assistant:ok', 'user:second', 'assistant:ok']);
  // The model was asked with the message that was not written yet.
  const asked = h.turnRequests().at(-1)!.body.messages.at(-1)!;
  expect(asked.role).toBe('user');
  expect(asked.content).toMatch(/\nsecond$/);
});

it('a turn whose model call fails still leaves the user\'s message in the transcript', async () => {
  let fail = false;
  h = await startHarness({ reply: (request) => (fail ? { status: 400, error: { message: 'bad request' } } : defaultReply(request)) });
  await h.send('first');
  fail = true;
  await expect(h.send('lost?')).rejects.toThrow();
  const messages = h.fileEntries().flatMap((e) => (e.type === 'message' ? [`${e.role}:${e.content}`] : []));
  expect(messages).toEqual(['user:first', 'assistant:ok', 'user:lost?']);
  expect(h.session().entry.messageCount).toBe(3);
});
