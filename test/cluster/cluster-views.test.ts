import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { createWebchatChannel } from '../../channels/webchat/index.ts';
import { LISTENER_APPLICATION_NAME } from '../../src/cluster/cluster-listener.ts';
import { systemClock } from '../../src/core/clock.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { readSse, type SseReader } from '../dashboard/sse.ts';
import { userText, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { useFakeOpenAI, useTempDir } from '../helpers/fixtures.ts';
import { testConfig } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase();

const toolRounds = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
const search = (n: number): FakeReply => ({ toolCalls: [{ id: `t${n}`, name: 'memory_search', arguments: '{"query":"anything"}' }], usage: { prompt_tokens: 20, completion_tokens: 2 } });
const say = (content: string): FakeReply => ({ content, usage: { prompt_tokens: 20, completion_tokens: 3 } });
const lastUser = (r: RecordedRequest) => userText([...r.body.messages].reverse().find((m) => m.role === 'user')?.content);

/**
 * Two replicas on one database. Replica A is started without listening (as `switchboard chat` would be), so it
 * never claims queued work: whatever is queued runs on B, and what A's pages and routes show of it came across.
 */
describePg('cluster mode: what a page of one replica sees covers the others', () => {
  const fake = useFakeOpenAI();
  const tmpA = useTempDir();
  const tmpB = useTempDir();
  const running: RunningGateway[] = [];
  let streams: SseReader[] = [];
  afterEach(async () => {
    await Promise.all(streams.map((s) => s.cancel()));
    streams = [];
    for (const gw of running.splice(0)) await gw.stop();
    await db.pool.query('TRUNCATE sb_lane, sb_inbox, sb_delivery, sb_ledger, sb_ledger_total CASCADE');
  });

  async function replica(id: 'a' | 'b', config: Record<string, unknown> = {}): Promise<{ gw: RunningGateway; telegram: TestChannel }> {
    const telegram = new TestChannel('telegram');
    const gw = await startGateway({
      config: testConfig(id === 'a' ? tmpA.dir : tmpB.dir, {
        store: db.uri, cluster: { pollMs: 100, replicaId: `views-${id}` },
        providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } }, ...config,
      }),
      logger: silentLogger(), adapters: [telegram, createWebchatChannel({ clock: systemClock })], listen: id === 'b',
    });
    running.push(gw);
    await gw.supervisor.firstAttempts();
    return { gw, telegram };
  }

  /** Model calls for a message saying "slow" wait until the returned function is called; the others answer at once. */
  const holdSlowTurns = (): (() => void) => {
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    fake.fallback = async (r) => {
      if (lastUser(r).includes('slow')) await held;
      return say('done');
    };
    return release;
  };

  /** A request to a replica in-process, as from its own host. */
  const request = (gw: RunningGateway, path: string, init: RequestInit = {}) =>
    gw.app.request(path, { ...init, headers: { host: '127.0.0.1', ...(init.headers as Record<string, string> | undefined) } });
  const sse = async (gw: RunningGateway, path: string) => {
    const response = await request(gw, path);
    expect(response.status).toBe(200);
    const reader = readSse(response);
    streams.push(reader);
    return reader;
  };

  it('a turn run on B shows on A\'s dashboard stream', async () => {
    const a = await replica('a');
    const b = await replica('b');
    // What A tells the others on sb_events, heard here as B hears it.
    const watcher = new pg.Client({ connectionString: db.uri });
    await watcher.connect();
    try {
      const told: { t: string; r: string }[] = [];
      watcher.on('notification', (n) => told.push(JSON.parse(n.payload ?? '{}') as { t: string; r: string }));
      await watcher.query('LISTEN sb_events');
      const events = await sse(a.gw, '/dashboard/events');
      expect((await events.next()).event).toBe('hello');
      // A page is open on A: A asks the others to publish their session changes.
      await until(() => told.some((m) => m.t === 'w' && m.r === 'views-a'), 'A says a page watches');
      const submission = await b.telegram.inject('hello from B', { peerId: '41', chatId: '41' });
      const key = submission.sessionKey!;
      const event = await events.until((e) => e.event === 'session' && (e.data as { key: string }).key === key);
      expect(event.data).toMatchObject({ key });
      // B published it; A never ran the session.
      await until(() => told.some((m) => m.t === 's' && m.r === 'views-b'), 'B\'s session change on sb_events');
      expect([...a.gw.sessions.activeSessions()]).toHaveLength(0);
    } finally {
      await watcher.end();
    }
  }, 30_000);

  it('/admin/runs on A shows the run B is running as running', async () => {
    const release = holdSlowTurns();
    const a = await replica('a');
    const b = await replica('b');
    const submission = await b.telegram.inject('slow one', { peerId: '42', chatId: '42' });
    const key = submission.sessionKey!;
    await until(() => fake.requests.length > 0, 'B\'s LLM call');
    type Runs = { runs: { sessionKey: string; turnRunning: boolean; queued: number }[] };
    const runsOf = async (gw: RunningGateway) => ((await (await request(gw, '/admin/runs')).json()) as Runs).runs;
    const onA = await until(async () => (await runsOf(a.gw)).find((r) => r.sessionKey === key), 'B\'s run listed on A');
    expect(onA).toMatchObject({ turnRunning: true, queued: 0 });
    expect(a.gw.gateway.lanes.isRunning(key)).toBe(false);
    release();
    await b.telegram.waitForSent(1);
    await until(async () => !(await runsOf(a.gw)).some((r) => r.sessionKey === key && r.turnRunning), 'the run no longer running on A');
  }, 30_000);

  it('/status on A shows B\'s running turn and the messages queued behind it, in the chat and in GET /status', async () => {
    const release = holdSlowTurns();
    const a = await replica('a');
    const b = await replica('b');
    const peer = { peerId: '43', chatId: '43' };
    await b.telegram.inject('slow one', peer);
    await until(() => fake.requests.length > 0, 'B\'s LLM call');
    await b.telegram.inject('next one', peer);
    await b.telegram.inject('and another', peer);
    try {
      await (await a.telegram.inject('/status', peer)).done;
      const said = a.telegram.sent.at(-1)!.message.text;
      expect(said).toContain('• turn: running, 2 queued');
      expect(said).toMatch(/· 1 running, 2 queued/);
      const status = (await (await request(a.gw, '/status')).json()) as { queue: { running: number; queued: number } };
      expect(status.queue).toEqual({ running: 1, queued: 2 });
      expect(a.gw.gateway.lanes.isRunning('agent:main:telegram:direct:43')).toBe(false);
    } finally {
      release();
    }
    await b.telegram.waitForSent(3);
  }, 30_000);

  it('A\'s /status provider figures include B\'s calls, tokens and failures', async () => {
    fake.fallback = (r) => (lastUser(r).includes('fail') ? { status: 500, error: { message: 'upstream broke' } } : say('fine'));
    const a = await replica('a');
    const b = await replica('b');
    type Status = { providers: { id: string; requests: number; errors: number; totalTokens: number; lastError?: { code: string } }[] };
    const providerOf = async (gw: RunningGateway) => ((await (await request(gw, '/status')).json()) as Status).providers.find((p) => p.id === 'default')!;
    expect(await providerOf(a.gw)).toMatchObject({ requests: 0, errors: 0, totalTokens: 0 });
    await b.telegram.inject('one', { peerId: '43', chatId: '43' });
    await b.telegram.inject('two', { peerId: '44', chatId: '44' });
    await b.telegram.inject('please fail', { peerId: '45', chatId: '45' });
    await b.telegram.waitForSent(3);
    // Two calls that returned (23 tokens each) and one that failed, all on B.
    const seen = await until(async () => {
      const p = await providerOf(a.gw);
      return p.requests === 3 && p.errors === 1 && p.totalTokens === 46 ? p : undefined;
    }, 'B\'s calls in A\'s /status');
    expect(seen.lastError).toBeDefined();
    expect(await providerOf(b.gw)).toMatchObject({ requests: 3, errors: 1, totalTokens: 46 });
    // A's own tracker saw none of it: the figures are the cluster's.
    expect(a.gw.accounting.providers.providerTotals('default').requests).toBe(0);
  }, 30_000);

  it('a web chat page on A closed mid-turn: the answer reaches the same user\'s page open on B', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    fake.fallback = async () => {
      await held;
      return say('The plan has three steps.');
    };
    const a = await replica('a');
    const b = await replica('b');
    const onB = await sse(b.gw, '/webchat/events?user=dave');
    expect((await onB.next()).event).toBe('ready');
    const page = new AbortController();
    const posted = Promise.resolve(request(a.gw, '/webchat/messages', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'dave', text: 'what is the plan?' }), signal: page.signal,
    })).then((r) => r.text()).catch(() => undefined);
    await until(() => fake.requests.length === 1, 'the turn on A at the provider');
    page.abort();
    release();
    const reply = await onB.until((e) => e.event === 'reply');
    expect(reply.data).toMatchObject({ text: 'The plan has three steps.', kind: 'reply' });
    await posted;
  }, 30_000);

  for (const cut of [false, true]) {
    it(`a web chat goal posted to A whose background batch runs on B: the reply reaches A's page${cut ? ' (A\'s listener connection cut meanwhile)' : ''}`, async () => {
      const user = cut ? 'carol' : 'alice';
      let release!: () => void;
      const held = new Promise<void>((r) => { release = r; });
      fake.fallback = async (r) => {
        if (toolRounds(r) < 3) return search(toolRounds(r));
        await held;
        return say('goal reached: **3** searches');
      };
      const a = await replica('a', { agents: { defaults: { maxIterationsPerBatch: 2 } }, backgroundExecution: { enabled: true } });
      await replica('b', { agents: { defaults: { maxIterationsPerBatch: 2 } }, backgroundExecution: { enabled: true } });
      const page = await sse(a.gw, `/webchat/events?user=${user}`);
      expect((await page.next()).event).toBe('ready');
      const post = async (text: string) => ((await (await request(a.gw, '/webchat/messages', {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }),
      })).json()) as { reply: string }).reply;
      expect(await post('/goal search 3 times')).toMatch(/^Goal set/);
      expect(await post('go')).toMatch(/continuing in the background/);
      // The next batch is queued; only B claims work. It is held at its last LLM call.
      await until(() => fake.requests.length >= 4, 'B\'s background batch at its last call');
      if (cut) {
        const { rowCount } = await db.pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()', [LISTENER_APPLICATION_NAME]);
        expect(rowCount).toBeGreaterThan(0);
      }
      release();
      const reply = await page.until((e) => e.event === 'reply');
      expect(reply.data).toMatchObject({ text: 'goal reached: **3** searches', kind: 'reply' });
      // The batch ran on B (A claims no queued work).
      const { rows } = await db.pool.query<{ owner: string }>('SELECT owner FROM sb_lane WHERE session_key = $1', [`agent:main:direct:${user}`]);
      expect(rows[0]?.owner).toBe('views-b');
    }, 30_000);
  }
});
