import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Submission } from '../../src/core/channel-adapter.ts';
import type { RunningGateway } from '../../src/main.ts';
import type { QueueTimers } from '../../src/gateway/queue-mode.ts';
import { lastUser, startFakeOpenAI, userText, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { pendingInJournal as journalPending } from '../helpers/inbox-journal.ts';

type Entry = { type: string; role?: string; content?: string; sourceId?: string; toolCalls?: unknown[]; interrupted?: boolean };

const KEY = 'agent:main:main';

/** Debounce timers the test fires itself: `advance(ms)` runs those due within `ms` (no real waiting). */
class DebounceTimers implements QueueTimers {
  private readonly pending = new Map<number, { ms: number; fn: () => void }>();
  private next = 1;
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.pending.set(id, { ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  /** The delays of the timers set and not fired or cleared. */
  delays(): number[] {
    return [...this.pending.values()].map((t) => t.ms);
  }
  advance(ms: number): void {
    for (const [id, t] of [...this.pending]) {
      if (t.ms > ms) continue;
      this.pending.delete(id);
      t.fn();
    }
  }
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000 && !condition(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!condition()) throw new Error(`timed out waiting for ${what}`);
}

/** The user texts of a request (without runtime lines). */
const usersOf = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'user').map((m) => userText(m.content));
/** A tool-calling answer (memory_search, from the `minimal` preset). */
const toolCall = (id: string): FakeReply => ({ toolCalls: [{ id, name: 'memory_search', arguments: '{"query":"notes"}' }] });

describe('queue modes (SPEC §16): collect, steer, interrupt', () => {
  let fake: FakeOpenAI;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;
  let channel: TestChannel;
  let timers: DebounceTimers;
  /** Requests the test holds: answered when the test says. */
  let held: { request: RecordedRequest; answer: (reply: FakeReply) => void }[];

  const start = async (queue: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
    channel = new TestChannel();
    gw = await startTestGateway({
      dir: tmp.dir, env: { OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-test' }, adapters: [channel], queueTimers: timers,
      config: {
        channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } }, session: { reset: { mode: 'off' } },
        agents: { defaults: { tools: { preset: 'minimal' } } }, messages: { queue }, providers: { default: { maxRetries: 0 } }, ...extra,
      },
    });
    return gw;
  };
  /** Every message entry of the session's transcript. */
  const transcript = async (): Promise<Entry[]> => {
    const entry = await gw!.store.get(KEY);
    const file = path.join(tmp.dir, 'data', 'agents', 'main', 'sessions', `${entry!.sessionId}.jsonl`);
    return readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Entry).filter((e) => e.type === 'message');
  };
  /** Messages the inbox journal holds as accepted and not done. */
  const pendingInJournal = () => journalPending(path.join(tmp.dir, 'data'));
  /** Each user entry once (by sourceId and by text), and each followed by a final answer. */
  const expectEachOnceAndAnswered = (entries: Entry[], texts: string[]) => {
    const users = entries.filter((e) => e.role === 'user');
    expect(users.map((u) => u.content).sort()).toEqual([...texts].sort());
    expect(new Set(users.map((u) => u.sourceId)).size).toBe(users.length);
    for (const u of users) {
      const after = entries.slice(entries.indexOf(u) + 1);
      expect(after.some((e) => e.role === 'assistant' && !e.toolCalls?.length)).toBe(true);
    }
  };
  const inject = async (texts: string[]): Promise<Submission[]> => {
    const subs: Submission[] = [];
    for (const [i, text] of texts.entries()) subs.push(await channel.inject(text, { deliveryId: `d-${text}-${i}` }));
    return subs;
  };

  beforeEach(async () => {
    held = [];
    timers = new DebounceTimers();
    fake = await startFakeOpenAI((request) => new Promise((answer) => held.push({ request, answer })));
    tmp = tempDir();
  });
  afterEach(async () => {
    for (const h of held.splice(0)) h.answer({ content: 'late' });
    await gw?.stop();
    gw = undefined;
    await fake.close();
    tmp.remove();
  });

  it('collect: a burst waits for the debounce and is one turn carrying every message, each its own user entry', async () => {
    await start({ mode: 'collect', debounceMs: 1500 });
    fake.fallback = (r) => ({ content: `re: ${usersOf(r).join(' + ')}` });
    const subs = await inject(['one', 'two', 'three']);
    await new Promise((r) => setTimeout(r, 30));
    expect(fake.requests).toHaveLength(0);
    // The debounce restarts with each message: only the last one's timer is left, at the full delay.
    expect(timers.delays()).toEqual([1500]);
    timers.advance(1500);
    const results = await Promise.all(subs.map((s) => s.done));
    expect(fake.requests).toHaveLength(1);
    expect(usersOf(fake.requests[0]!)).toEqual(['one', 'two', 'three']);
    expect(channel.texts()).toEqual(['re: one + two + three']);
    expect(results.every((r) => r === results[0] && r?.outcome === 'replied')).toBe(true);
    expectEachOnceAndAnswered(await transcript(), ['one', 'two', 'three']);
    expect(pendingInJournal()).toEqual([]);
  });

  it('collect: messages that arrive while a tool-loop turn runs are answered together in the next turn; a command is never collected', async () => {
    await start({ mode: 'collect', debounceMs: 1500 });
    const [first] = await inject(['first']);
    timers.advance(1500);
    await until(() => held.length === 1, 'the first request');
    held.shift()!.answer(toolCall('c1'));
    await until(() => held.length === 1, 'the request after the tool');
    const later = await inject(['second', 'third']);
    timers.advance(1500);
    held.shift()!.answer({ content: 're: first' });
    await first!.done;
    await until(() => held.length === 1, 'the collected turn');
    expect(usersOf(held[0]!.request).slice(-2)).toEqual(['second', 'third']);
    // A command while the burst's turn runs is its own turn, after it.
    const status = await channel.inject('/new fresh start', { deliveryId: 'd-new' });
    held.shift()!.answer({ content: 're: second + third' });
    await Promise.all(later.map((s) => s.done));
    expect((await later[0]!.done)?.replies[0]?.text).toBe('re: second + third');
    await until(() => held.length === 1, 'the /new turn');
    expect(usersOf(held[0]!.request)).toEqual(['fresh start']);
    held.shift()!.answer({ content: 're: fresh start' });
    await status.done;
    expect(fake.requests).toHaveLength(4);
    expect(channel.texts()).toEqual(['re: first', 're: second + third', 're: fresh start']);
    expect(pendingInJournal()).toEqual([]);
  });

  it('steer: a message that arrives during a tool loop joins the running turn at its next boundary and gets no turn of its own', async () => {
    await start({ mode: 'steer' });
    const [a] = await inject(['look it up']);
    await until(() => held.length === 1, 'the first request');
    const [b] = await inject(['also check the calendar']);
    held.shift()!.answer(toolCall('c1'));
    await until(() => held.length === 1, 'the request after the tool');
    // The next model request carries the steered message, after the tool result.
    const roles = held[0]!.request.body.messages.filter((m) => m.role !== 'system').map((m) => m.role);
    expect(roles).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(lastUser(held[0]!.request)).toBe('also check the calendar');
    held.shift()!.answer({ content: 'done both' });
    const [ra, rb] = await Promise.all([a!.done, b!.done]);
    expect(rb).toBe(ra);
    await new Promise((r) => setTimeout(r, 30));
    expect(fake.requests).toHaveLength(2);
    expect(channel.texts()).toEqual(['done both']);
    const entries = await transcript();
    expect(entries.map((e) => e.role)).toEqual(['user', 'assistant', 'tool', 'user', 'assistant']);
    expectEachOnceAndAnswered(entries, ['look it up', 'also check the calendar']);
    expect(pendingInJournal()).toEqual([]);
  });

  it('steer: with no tool-call boundary left, the message becomes the next turn', async () => {
    await start({ mode: 'steer' });
    const [a] = await inject(['quick']);
    await until(() => held.length === 1, 'the first request');
    const [b] = await inject(['and another']);
    held.shift()!.answer({ content: 're: quick' });
    await a!.done;
    await until(() => held.length === 1, 'the second turn');
    expect(lastUser(held[0]!.request)).toBe('and another');
    held.shift()!.answer({ content: 're: and another' });
    expect((await b!.done)?.replies[0]?.text).toBe('re: and another');
    expect(channel.texts()).toEqual(['re: quick', 're: and another']);
    expectEachOnceAndAnswered(await transcript(), ['quick', 'and another']);
  });

  it('interrupt: a new message stops the running turn; its partial answer stays marked interrupted; the new message is answered', async () => {
    await start({ mode: 'interrupt' });
    const [a] = await inject(['write a long essay']);
    await until(() => held.length === 1, 'the first request');
    held.shift()!.answer({ ...toolCall('c1'), content: 'Let me gather notes first.' });
    await until(() => held.length === 1, 'the request after the tool');
    const [b] = await inject(['never mind, just say hi']);
    expect((await a!.done)?.outcome).toBe('stopped');
    await until(() => held.some((h) => lastUser(h.request) === 'never mind, just say hi'), 'the new turn');
    const next = held.find((h) => lastUser(h.request) === 'never mind, just say hi')!;
    next.answer({ content: 'hi' });
    expect((await b!.done)?.replies[0]?.text).toBe('hi');
    // No "Stopped" notice: the new message's answer is the reply.
    expect(channel.texts()).toEqual(['hi']);
    const entries = await transcript();
    expect(entries.map((e) => e.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user', 'assistant']);
    const partial = entries[3]!;
    expect(partial.interrupted).toBe(true);
    expect(partial.content).toContain('Let me gather notes first.');
    expect(partial.content).toContain('[interrupted]');
    // The new turn's request shows the model the interrupted answer.
    expect(next.request.body.messages.some((m) => m.role === 'assistant' && (m.content ?? '').includes('[interrupted]'))).toBe(true);
    expectEachOnceAndAnswered(entries, ['write a long essay', 'never mind, just say hi']);
    expect(pendingInJournal()).toEqual([]);
  });

  it('followup (the default) keeps one turn per message', async () => {
    await start({});
    fake.fallback = (r) => ({ content: `re: ${lastUser(r)}` });
    const subs = await inject(['a', 'b']);
    await Promise.all(subs.map((s) => s.done));
    expect(timers.delays()).toEqual([]);
    expect(channel.texts()).toEqual(['re: a', 're: b']);
  });

  it('a restart in the middle of a steered turn loses nothing and runs nothing twice', async () => {
    await start({ mode: 'steer' }, { gateway: { shutdownGraceMs: 50 } });
    await inject(['research this']);
    await until(() => held.length === 1, 'the first request');
    await inject(['and summarise']);
    held.shift()!.answer(toolCall('c1'));
    await until(() => held.length === 1, 'the request carrying the steered message');
    // Stopped while the request that carries both is in flight: both user entries are in the transcript.
    await gw!.stop();
    gw = undefined;
    held.splice(0);
    expect(pendingInJournal()).toHaveLength(2);
    fake.fallback = (r) => ({ content: `re: ${lastUser(r)}` });
    channel = new TestChannel();
    await start({ mode: 'steer' });
    await until(() => pendingInJournal().length === 0, 'the replayed messages to finish');
    const entries = await transcript();
    expectEachOnceAndAnswered(entries, ['research this', 'and summarise']);
    // One answer after the restart (the first message was taken up by the turn that answers the second).
    expect(channel.texts()).toEqual(['re: and summarise']);
    expect(entries.filter((e) => e.role === 'assistant' && !e.toolCalls?.length)).toHaveLength(1);
  });

  it('a restart in the middle of a collected turn loses nothing and runs nothing twice', async () => {
    await start({ mode: 'collect', debounceMs: 1500 }, { gateway: { shutdownGraceMs: 50 } });
    await inject(['x1', 'x2', 'x3']);
    timers.advance(1500);
    await until(() => held.length === 1, 'the collected request');
    await gw!.stop();
    gw = undefined;
    held.splice(0);
    expect(pendingInJournal()).toHaveLength(3);
    fake.fallback = (r) => ({ content: `re: ${usersOf(r).join(' + ')}` });
    await start({ mode: 'collect', debounceMs: 1500 });
    await until(() => pendingInJournal().length === 0, 'the replayed messages to finish');
    const entries = await transcript();
    expectEachOnceAndAnswered(entries, ['x1', 'x2', 'x3']);
    expect(fake.requests.at(-1) && usersOf(fake.requests.at(-1)!)).toEqual(['x1', 'x2', 'x3']);
    expect(channel.texts()).toEqual(['re: x1 + x2 + x3']);
  });
});
