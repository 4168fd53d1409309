// SPEC §16 queue modes in cluster mode: the replica that claimed a session applies them to the messages queued in
// PostgreSQL, whichever replica accepted them. Each accepted message is in the transcript once and answered by some
// turn; a message a turn carried is marked done with it.
import pg from 'pg';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { Submission } from '../../src/core/channel-adapter.ts';
import type { DeliveryTarget, OutboundMessage } from '../../src/core/message.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startFakeOpenAI, userText, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase({ migrate: false });

type Entry = { type: string; role?: string; content?: string; sourceId?: string; toolCalls?: unknown[]; interrupted?: boolean };

/** The user texts of a request. */
const usersOf = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'user').map((m) => userText(m.content));
/** A tool-calling answer (memory_search, from the `minimal` preset). */
const toolCall = (id: string): FakeReply => ({ toolCalls: [{ id, name: 'memory_search', arguments: '{"query":"notes"}' }] });

/** A channel whose sends wait at a gate the test opens (a reply on its way to the platform). */
class GatedChannel extends TestChannel {
  gate: Promise<void> | undefined;
  waiting = 0;
  override async send(target: DeliveryTarget, message: OutboundMessage): Promise<void> {
    this.waiting++;
    await this.gate;
    return super.send(target, message);
  }
}

describePg('queue modes in cluster mode (SPEC §16)', () => {
  let fake: FakeOpenAI;
  let held: { request: RecordedRequest; answer: (reply: FakeReply) => void }[];
  const replicas: { gw: RunningGateway; channel: TestChannel; remove: () => void }[] = [];
  let timers: ManualTimers;
  /** Each test talks as its own person (its own session). */
  let peer = 0;
  let key = '';

  beforeEach(async () => {
    held = [];
    timers = new ManualTimers();
    peer++;
    key = '';
    fake = await startFakeOpenAI((request) => new Promise((answer) => held.push({ request, answer })));
  });
  afterEach(async () => {
    for (const h of held.splice(0)) h.answer({ content: 'late' });
    for (const r of replicas.splice(0)) { await r.gw.stop(); r.remove(); }
    await fake.close();
  });

  async function replica(id: string, queue: Record<string, unknown>, channel = new TestChannel('telegram')): Promise<{ gw: RunningGateway; channel: TestChannel }> {
    const tmp = tempDir();
    const gw = await startTestGateway({
      // The debounce test fires the timers itself; the others keep real ones (with debounceMs 0 a burst may still
      // wait a few ms: the database's clock and this process's are compared).
      dir: tmp.dir, adapters: [channel], ...(Number(queue.debounceMs) > 0 ? { queueTimers: timers } : {}),
      config: {
        store: db.uri, cluster: { pollMs: 200, replicaId: id },
        channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } },
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        agents: { defaults: { tools: { preset: 'minimal' } } }, messages: { queue },
      },
    });
    replicas.push({ gw, channel, remove: tmp.remove });
    return { gw, channel };
  }
  const inject = async (channel: TestChannel, text: string) => {
    const sub = await channel.inject(text, { deliveryId: `d-${peer}-${text}`, peerId: `p${peer}`, chatId: `p${peer}` });
    key ||= sub.sessionKey ?? '';
    return sub;
  };
  const sentTexts = () => replicas.flatMap((r) => r.channel.sent.map((s) => s.message.text));
  /** The session's transcript entries, from PostgreSQL. */
  const transcript = async (gw: RunningGateway): Promise<Entry[]> => {
    const entry = await gw.store.get(key);
    const { rows } = await db.pool.query<{ entry: Entry }>('SELECT entry FROM sb_transcript_entry WHERE session_id = $1 ORDER BY n', [entry!.sessionId]);
    return rows.map((r) => r.entry).filter((e) => e.type === 'message');
  };
  const users = async (gw: RunningGateway) => (await transcript(gw)).filter((e) => e.role === 'user').map((e) => e.content);
  const notDone = async () => (await db.pool.query('SELECT seq FROM sb_inbox WHERE done_at IS NULL AND session_key = $1', [key])).rowCount;

  it('collect: a burst waits for the debounce and is one turn carrying every message; each is marked done with it', async () => {
    const { gw, channel } = await replica('ra', { mode: 'collect', debounceMs: 1500 });
    const subs: Submission[] = [];
    for (const text of ['one', 'two', 'three']) subs.push(await inject(channel, text));
    // The turn waits for the debounce: nothing is asked of the model until the test lets the time pass.
    await until(() => timers.delays().length === 1, 'the debounce timer');
    expect(fake.requests).toHaveLength(0);
    await until(() => {
      timers.advance(60_000);
      return held.length === 1;
    }, 'the burst turn');
    expect(usersOf(held[0]!.request)).toEqual(['one', 'two', 'three']);
    held[0]!.answer({ content: 'one answer for three' });
    const results = await Promise.all(subs.map((s) => s.done));
    expect(results.map((r) => r?.replies[0]?.text)).toEqual(['one answer for three', 'one answer for three', 'one answer for three']);
    expect(fake.requests).toHaveLength(1);
    expect(sentTexts()).toEqual(['one answer for three']);
    expect(await users(gw)).toEqual(['one', 'two', 'three']);
    expect(await notDone()).toBe(0);
  });

  it('collect: messages accepted by another replica while a turn runs are answered together in the next turn; a command is not collected', async () => {
    const a = await replica('ra', { mode: 'collect', debounceMs: 0 });
    const b = await replica('rb', { mode: 'collect', debounceMs: 0 });
    await inject(a.channel, 'first');
    await until(() => held.length === 1, 'the first turn');
    for (const text of ['second', 'third']) await inject(b.channel, text);
    await inject(b.channel, '/new');
    await inject(b.channel, 'fourth');
    held[0]!.answer({ content: 'answer 1' });
    await until(() => held.length === 2, 'the second turn');
    expect(usersOf(held[1]!.request)).toEqual(['first', 'second', 'third']);
    held[1]!.answer({ content: 'answer 2+3' });
    // The reset trigger runs on its own, then the message after it starts a new burst.
    await until(() => held.length === 3, 'the turn after the reset');
    expect(usersOf(held[2]!.request)).toEqual(['fourth']);
    held[2]!.answer({ content: 'answer 4' });
    await until(async () => (await notDone()) === 0, 'every message done');
    expect(fake.requests).toHaveLength(3);
    expect(sentTexts().filter((t) => t.startsWith('answer'))).toEqual(['answer 1', 'answer 2+3', 'answer 4']);
  });

  it('steer: a message another replica accepted joins the running turn at its next tool-call boundary and gets no turn of its own', async () => {
    const a = await replica('ra', { mode: 'steer' });
    const b = await replica('rb', { mode: 'steer' });
    const listener = new pg.Client({ connectionString: db.uri });
    await listener.connect();
    const notices: string[] = [];
    listener.on('notification', (n) => notices.push(n.payload ?? ''));
    await listener.query('LISTEN sb_ready');
    try {
      await inject(a.channel, 'look something up');
      await until(() => held.length === 1, 'the first model call');
      const late = await inject(b.channel, 'and also this');
      // The replica running the turn hears of it the way every replica does.
      await until(() => notices.includes(key), 'the notice of new work');
      held[0]!.answer(toolCall('c1'));
      await until(() => held.length === 2, 'the call after the tool');
      expect(usersOf(held[1]!.request)).toEqual(['look something up', 'and also this']);
      held[1]!.answer({ content: 'both handled' });
      expect((await late.done)?.replies[0]?.text).toBe('both handled');
    } finally {
      await listener.end();
    }
    expect(fake.requests).toHaveLength(2);
    expect(sentTexts()).toEqual(['both handled']);
    expect(await users(a.gw)).toEqual(['look something up', 'and also this']);
    expect(await notDone()).toBe(0);
  });

  it('steer: with no tool-call boundary left, the message becomes the next turn', async () => {
    const a = await replica('ra', { mode: 'steer' });
    await inject(a.channel, 'quick question');
    await until(() => held.length === 1, 'the first model call');
    await inject(a.channel, 'another one');
    held[0]!.answer({ content: 'quick answer' });
    await until(() => held.length === 2, 'the second turn');
    expect(usersOf(held[1]!.request)).toEqual(['quick question', 'another one']);
    held[1]!.answer({ content: 'second answer' });
    await until(async () => (await notDone()) === 0, 'every message done');
    expect(sentTexts()).toEqual(['quick answer', 'second answer']);
  });

  it('interrupt: a message another replica accepted stops the running turn; its partial answer stays marked interrupted', async () => {
    const a = await replica('ra', { mode: 'interrupt' });
    const b = await replica('rb', { mode: 'interrupt' });
    await inject(a.channel, 'write me an essay');
    await until(() => held.length === 1, 'the first model call');
    held[0]!.answer(toolCall('c1'));
    await until(() => held.length === 2, 'the call after the tool');
    await inject(b.channel, 'never mind, just say hi');
    // The running turn is stopped (its model call left unanswered); the new message gets a turn.
    await until(() => held.length === 3, 'the new message turn');
    expect(usersOf(held[2]!.request)).toEqual(['write me an essay', 'never mind, just say hi']);
    held[2]!.answer({ content: 'hi' });
    await until(async () => (await notDone()) === 0, 'every message done');
    const entries = await transcript(a.gw);
    expect(entries.filter((e) => e.interrupted)).toHaveLength(1);
    expect(entries.filter((e) => e.role === 'user').map((e) => e.content)).toEqual(['write me an essay', 'never mind, just say hi']);
    expect(sentTexts().at(-1)).toBe('hi');
  });

  it('a collected turn whose replica loses the session lock after writing its answer: each message stays once in the transcript, nothing is asked again', async () => {
    const a = await replica('ra', { mode: 'collect', debounceMs: 0 }, new GatedChannel('telegram'));
    const b = await replica('rb', { mode: 'collect', debounceMs: 0 });
    await inject(a.channel, 'first');
    await until(() => held.length === 1, 'the first turn');
    for (const text of ['second', 'third']) await inject(b.channel, text);
    const gated = a.channel as GatedChannel;
    let open!: () => void;
    gated.gate = new Promise<void>((resolve) => { open = resolve; });
    held[0]!.answer({ content: 'answer 1' });
    await until(() => gated.waiting === 1, 'the first reply at the platform');
    open();
    await until(() => held.length === 2, 'the collected turn');
    expect(usersOf(held[1]!.request)).toEqual(['first', 'second', 'third']);
    gated.gate = new Promise<void>((resolve) => { open = resolve; });
    held[1]!.answer({ content: 'answer 2+3' });
    // The answer is in the transcript and on its way to the platform when the lock's connection dies.
    await until(() => gated.waiting === 2, 'the collected reply at the platform');
    const { rows } = await db.pool.query<{ pid: number }>(`SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()`);
    expect(rows).toHaveLength(1);
    await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    open();
    // The other replica runs the carried messages again, each as a replay: the transcript already answers them.
    await until(async () => (await notDone()) === 0, 'every message done');
    expect(fake.requests).toHaveLength(2);
    expect(await users(a.gw)).toEqual(['first', 'second', 'third']);
    expect((await transcript(a.gw)).filter((e) => e.role === 'assistant').map((e) => e.content)).toEqual(['answer 1', 'answer 2+3']);
    // The answer was at the platform when the lock went: it may go out again (once), and both messages of the carried
    // turn are counted as reruns whose reply may have gone out already.
    expect(sentTexts().filter((t) => t === 'answer 2+3').length).toBeLessThanOrEqual(2);
    // Counted by whichever replica ran them again (the one that lost the lock may claim the session again too).
    let windows = 0;
    for (const gw of [a.gw, b.gw]) {
      const metrics = await (await gw.app.request('/metrics', { headers: { host: '127.0.0.1' } })).text();
      windows += Number(/^switchboard_cluster_duplicate_reply_windows_total (\d+)$/m.exec(metrics)?.[1]);
    }
    expect(windows).toBe(2);
  });

  it('followup (the default) keeps one turn per message', async () => {
    const a = await replica('ra', {});
    await inject(a.channel, 'm1');
    await until(() => held.length === 1, 'the first turn');
    await inject(a.channel, 'm2');
    held[0]!.answer({ content: 'r1' });
    await until(() => held.length === 2, 'the second turn');
    held[1]!.answer({ content: 'r2' });
    await until(async () => (await notDone()) === 0, 'every message done');
    expect(sentTexts()).toEqual(['r1', 'r2']);
  });
});
