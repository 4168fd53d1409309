import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { flushNotes, localDate, memoryFileOf } from '../../src/agent/memory-flush.ts';
import { userText, type FakeReply } from '../fakes/fake-openai.ts';
import { defaultReply, kindOf, startHarness, type Harness } from './harness.ts';

/** Kinds of the requests from `from` on, with runs of summary calls collapsed to one 'compaction'. */
const collapsed = (h: Harness, from: number) => h.fake.requests.slice(from).map(kindOf).filter((k, i, all) => !(k === 'compaction' && all[i - 1] === 'compaction'));
const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i % 10}`).join(' ');
const config = (memoryFlush = true) => ({
  providers: { default: { contextWindow: 3000 } },
  agents: { defaults: { compaction: { reserveTokens: 1000, keepRecentTokens: 400, memoryFlush }, contextPruning: { mode: 'off' } } },
  session: { reset: { mode: 'off', timezone: 'Asia/Tokyo' } },
});

describe('memory flush', () => {
  let h: Harness | undefined;
  afterEach(async () => { await h?.close(); h = undefined; });

  it('runs one silent turn before compaction that appends notes to memory/YYYY-MM-DD.md, and sends nothing to the chat', async () => {
    h = await startHarness({
      config: config(), start: '2026-03-02T20:30:00Z',
      reply: (r): FakeReply => (kindOf(r) === 'memory-flush' ? { content: '- Alice prefers green tea\n- Project code name: BLUEBIRD', usage: null } : defaultReply(r)),
    });
    await h.send('hello');
    await h.seed(20, (i) => `fact ${i}: ${words(100)}`);
    const reply = await h.send('what do you remember?');
    expect(reply).toBe('ok');
    expect(collapsed(h, 1)).toEqual(['memory-flush', 'compaction', 'turn']);
    // The flush request is the conversation so far plus the flush instruction, with no tools.
    const flush = h.fake.requests.find((r) => kindOf(r) === 'memory-flush')!;
    expect(flush.body.messages.at(-1)!.content).toContain('memory/2026-03-03.md');
    expect(flush.body.messages.at(-2)!.role).toBe('user');
    expect(userText(flush.body.messages.at(-2)!.content)).toBe('what do you remember?');
    expect(flush.body.stream).toBeFalsy();

    // 20:30 UTC is 05:30 the next day in Tokyo, the session's time zone.
    const file = path.join(h.config.agents[0]!.workspace, 'memory', '2026-03-03.md');
    const text = readFileSync(file, 'utf8');
    expect(text).toBe('## 05:30 · agent:main:main (before compaction)\n\n- Alice prefers green tea\n- Project code name: BLUEBIRD\n\n');
    // Nothing of it reaches the chat or the transcript.
    expect(reply).not.toContain('BLUEBIRD');
    expect(JSON.stringify(h.fileEntries())).not.toContain('BLUEBIRD');
    expect(JSON.stringify(h.fileEntries())).not.toContain('Pre-compaction memory flush');
    // The next compaction-free turn does not flush again.
    await h.send('thanks');
    expect(h.fake.requests.map(kindOf).slice(-1)).toEqual(['turn']);
  });

  it('flushes once per compaction: not again when the compaction is retried, again for the next compaction', async () => {
    let failSummary = true;
    h = await startHarness({
      config: config(),
      reply: (r): FakeReply => {
        const kind = kindOf(r);
        if (kind === 'compaction' && failSummary) return { status: 500, error: { message: 'down' } };
        if (kind === 'memory-flush') return { content: `- note ${r.body.messages.length}`, usage: null };
        return defaultReply(r);
      },
    });
    await h.send('hello');
    await h.seed(20, (i) => `fact ${i}: ${words(100)}`);
    await h.send('one');
    expect(collapsed(h, 1)).toEqual(['memory-flush', 'compaction', 'turn']);
    failSummary = false;
    let mark = h.fake.requests.length;
    await h.send('two');
    expect(collapsed(h, mark)).toEqual(['compaction', 'turn']);
    expect(h.session().entry.compactionCount).toBe(1);
    await h.seed(20, (i) => `more ${i}: ${words(100)}`);
    mark = h.fake.requests.length;
    await h.send('three');
    expect(collapsed(h, mark)).toEqual(['memory-flush', 'compaction', 'turn']);
    const file = path.join(h.config.agents[0]!.workspace, memoryFileOf(h.clock.now(), 'Asia/Tokyo'));
    expect(readFileSync(file, 'utf8').match(/^## /gm)).toHaveLength(2);
  });

  it('writes nothing when the agent answers NO_REPLY, and never flushes when memoryFlush is off', async () => {
    h = await startHarness({ config: config() });
    await h.send('hello');
    await h.seed(20, (i) => `fact ${i}: ${words(100)}`);
    await h.send('go');
    expect(h.fake.requests.map(kindOf)).toContain('memory-flush');
    expect(existsSync(path.join(h.config.agents[0]!.workspace, 'memory'))).toBe(false);
    await h.close();

    h = await startHarness({ config: config(false) });
    await h.send('hello');
    await h.seed(20, (i) => `fact ${i}: ${words(100)}`);
    await h.send('go');
    expect(h.fake.requests.map(kindOf)).not.toContain('memory-flush');
    expect(h.fake.requests.map(kindOf)).toContain('compaction');
  });

  it('reads dates in the given zone and treats NO_REPLY variants as nothing to keep', () => {
    expect(localDate(Date.parse('2026-03-02T20:30:00Z'), 'Asia/Tokyo')).toBe('2026-03-03');
    expect(localDate(Date.parse('2026-03-02T20:30:00Z'), 'America/Los_Angeles')).toBe('2026-03-02');
    expect(flushNotes(' NO_REPLY. ')).toBeUndefined();
    expect(flushNotes('`NO_REPLY`')).toBeUndefined();
    expect(flushNotes('')).toBeUndefined();
    expect(flushNotes('- keep this\n')).toBe('- keep this');
  });
});
