import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { localDate, memoryFileOf } from '../../../src/agent/context/memory-flush.ts';
import { searchMemoryNotes } from '../../../src/tools/memory-notes.ts';
import { userText, type FakeReply } from '../../fakes/fake-openai.ts';
import { defaultReply, kindOf, startHarness, type Harness } from '../harness.ts';

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

  it('runs one silent turn before compaction whose memory_write calls append notes to memory/YYYY-MM-DD.md, and sends nothing to the chat', async () => {
    h = await startHarness({
      config: config(), start: '2026-03-02T20:30:00Z',
      reply: (r): FakeReply => {
        if (kindOf(r) !== 'memory-flush') return defaultReply(r);
        // First the notes through the tool, then (after its result) nothing more.
        if (r.body.messages.at(-1)!.role === 'tool') return { content: '', usage: null };
        return { toolCalls: [{ id: 'w1', name: 'memory_write', arguments: JSON.stringify({ note: '- Alice prefers green tea\n- Project code name: BLUEBIRD' }) }], usage: null };
      },
    });
    await h.send('hello');
    await h.seed(20, (i) => `fact ${i}: ${words(100)}`);
    const reply = await h.send('what do you remember?');
    expect(reply).toBe('ok');
    expect(collapsed(h, 1)).toEqual(['memory-flush', 'memory-flush', 'compaction', 'turn']);
    // The flush request is the conversation so far with the flush instruction joined to the last user
    // message (never two user messages in a row), and memory_write as its only tool.
    const flush = h.fake.requests.find((r) => kindOf(r) === 'memory-flush')!;
    const last = flush.body.messages.at(-1)!;
    expect(last.role).toBe('user');
    expect(userText(last.content)).toMatch(/^what do you remember\?\n\n\[Pre-compaction memory flush\]/);
    expect(last.content).toContain('memory/2026-03-03.md');
    expect(flush.body.messages.at(-2)!.role).not.toBe('user');
    expect((flush.body.tools as { function: { name: string } }[]).map((t) => t.function.name)).toEqual(['memory_write']);
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
        if (kind === 'memory-flush') {
          return r.body.messages.at(-1)!.role === 'tool' ? { content: '', usage: null }
            : { toolCalls: [{ id: `n${r.body.messages.length}`, name: 'memory_write', arguments: JSON.stringify({ note: `- note ${r.body.messages.length}` }) }], usage: null };
        }
        return defaultReply(r);
      },
    });
    await h.send('hello');
    await h.seed(20, (i) => `fact ${i}: ${words(100)}`);
    await h.send('one');
    expect(collapsed(h, 1)).toEqual(['memory-flush', 'memory-flush', 'compaction', 'turn']);
    failSummary = false;
    let mark = h.fake.requests.length;
    await h.send('two');
    expect(collapsed(h, mark)).toEqual(['compaction', 'turn']);
    expect(h.session().entry.compactionCount).toBe(1);
    await h.seed(20, (i) => `more ${i}: ${words(100)}`);
    mark = h.fake.requests.length;
    await h.send('three');
    expect(collapsed(h, mark)).toEqual(['memory-flush', 'memory-flush', 'compaction', 'turn']);
    const file = path.join(h.config.agents[0]!.workspace, memoryFileOf(h.clock.now(), 'Asia/Tokyo'));
    expect(readFileSync(file, 'utf8').match(/^## /gm)).toHaveLength(2);
  });

  it('writes nothing when the agent calls no tool (its text is not taken as notes), and never flushes when memoryFlush is off', async () => {
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

  it('reads dates in the given zone, and memory_search finds notes by all their words, newest first', async () => {
    expect(localDate(Date.parse('2026-03-02T20:30:00Z'), 'Asia/Tokyo')).toBe('2026-03-03');
    expect(localDate(Date.parse('2026-03-02T20:30:00Z'), 'America/Los_Angeles')).toBe('2026-03-02');
    h = await startHarness();
    const dir = path.join(h.config.agents[0]!.workspace, 'memory');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, '2026-03-01.md'), '## 09:00 · k\n\n- green tea for Alice\n\n## 10:00 · k\n\n- Bob likes coffee\n\n');
    writeFileSync(path.join(dir, '2026-03-02.md'), '## 08:00 · k\n\n- Alice switched to GREEN tea with honey\n\n');
    const hits = await searchMemoryNotes(h.config.agents[0]!.workspace, 'alice green', 10);
    expect(hits.map((x) => [x.file, x.text])).toEqual([
      ['memory/2026-03-02.md', '- Alice switched to GREEN tea with honey'],
      ['memory/2026-03-01.md', '- green tea for Alice'],
    ]);
    expect(await searchMemoryNotes(h.config.agents[0]!.workspace, 'alice coffee', 10)).toEqual([]);
    expect(await searchMemoryNotes(path.join(h.dir, 'nowhere'), 'x', 10)).toEqual([]);
  });
});
