import { afterEach, beforeEach, expect, it, onTestFailed } from 'vitest';
import pg from 'pg';
import { orphanedSessions } from '../../src/cluster/cluster-resume.ts';
import type { RunningGateway } from '../../src/main.ts';
import type { FakeReply, RecordedRequest } from '../fakes/fake-openai.ts';
import { userText } from '../fakes/fake-openai.ts';
import { useFakeOpenAI } from '../helpers/fixtures.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { capturingLogger, type LogLine } from '../helpers/log-capture.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase();
const KEY = 'agent:main:direct:5';
const FINAL = 'work finished';

/** Tool-calling rounds already in a request: 0 for the run's first call, 1 for its second, and so on. */
const rounds = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
const lastUser = (r: RecordedRequest) => userText([...r.body.messages].reverse().find((m) => m.role === 'user')?.content);

/** The backend pids holding a session lock in the test database (a lane connection each). */
async function laneBackends(): Promise<number[]> {
  const { rows } = await db.pool.query<{ pid: number }>(`SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
    WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()`);
  return rows.map((r) => r.pid);
}

describePg('cluster mode: goal runs a replica left behind are resumed once (SPEC §11, §13)', () => {
  const running: { gw: RunningGateway; remove: () => void; stopped: boolean }[] = [];
  /** The run needs four LLM calls: three ask for a tool, the fourth answers; two per batch. */
  const openai = useFakeOpenAI((r) => (rounds(r) >= 3 ? { content: FINAL } : { toolCalls: [{ id: `c${rounds(r)}`, name: 'memory_search', arguments: '{"query":"x"}' }] }));
  let log: { replica: string; text: string }[];
  let names = 0;
  /** Each replica's log lines, printed when a test fails (a timed-out run says which replica stopped where). */
  let logs: { name: string; lines: LogLine[] }[];
  beforeEach(async () => {
    log = [];
    logs = [];
    onTestFailed(() => {
      for (const { name, lines } of logs) {
        console.log(`--- ${name}\n${lines.map((l) => `${String(l.time).slice(11)} ${l.msg} ${JSON.stringify({ ...l, msg: undefined, time: undefined, level: undefined, pid: undefined, hostname: undefined })}`).join('\n')}`);
      }
      console.log(`LLM calls (tool rounds): ${openai.requests.map(rounds).join(' ')}; sent: ${JSON.stringify(log)}`);
    });
    await db.pool.query('TRUNCATE sb_lane, sb_inbox, sb_delivery, sb_transcript, sb_transcript_entry, sb_replica, keyv CASCADE');
  });
  afterEach(async () => {
    for (const r of running.splice(0)) { if (!r.stopped) await r.gw.stop(); r.remove(); }
  });

  async function replica(pollMs = 100): Promise<{ gw: RunningGateway; channel: TestChannel; name: string; stop: () => Promise<void> }> {
    const tmp = tempDir();
    const name = `r${++names}`;
    const channel = new TestChannel('telegram');
    const send = channel.send.bind(channel);
    channel.send = async (target, message) => { log.push({ replica: name, text: message.text }); await send(target, message); };
    const { logger, lines } = capturingLogger('debug');
    logs.push({ name, lines });
    const gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel], logger,
      config: {
        store: db.uri, cluster: { pollMs, replicaId: name },
        providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } },
        agents: { defaults: { tools: { preset: 'minimal' }, maxIterationsPerBatch: 2 } },
        backgroundExecution: { enabled: true },
      },
    });
    const held = { gw, remove: tmp.remove, stopped: false };
    running.push(held);
    return { gw, channel, name, stop: async () => { held.stopped = true; await gw.stop(); } };
  }

  /** Holds the LLM call with `round` tool rounds behind it until released; the others answer at once. */
  function holdRound(round: number): { released: (reply?: FakeReply) => void } {
    const base = openai.fallback;
    let release: ((reply: FakeReply) => void) | undefined;
    openai.fallback = (r) => {
      if (rounds(r) !== round || release) return base(r);
      return new Promise<FakeReply>((resolve) => { release = resolve; });
    };
    return { released: (reply) => { void until(() => release, 'the held call').then((r) => r(reply ?? { toolCalls: [{ id: `c${round}`, name: 'memory_search', arguments: '{"query":"x"}' }] })); } };
  }

  async function startRun(via: TestChannel): Promise<void> {
    await via.inject('/goal finish the work', { peerId: '5', chatId: '5', id: 'goal' });
    await until(() => log.some((l) => /goal/i.test(l.text)), 'the goal to be set');
    await via.inject('work', { peerId: '5', chatId: '5', id: 'work' });
  }

  const entry = async () => {
    const { rows } = await db.pool.query<{ value: string }>('SELECT value FROM keyv WHERE key LIKE $1', [`%${KEY}`]);
    return (JSON.parse(rows[0]!.value) as { value: { runState: string; checkpoint?: { batch: number } } }).value;
  };
  const resumeEntries = async () => (await db.pool.query(`SELECT 1 FROM sb_transcript_entry WHERE entry->>'role' = 'user' AND entry->>'content' LIKE '[background_auto_resume]%'`)).rowCount;

  it('a replica stopped while its batch ends at the limit (its continuation refused while closing): the other replica resumes the run, each LLM call once, the answer once', async () => {
    const a = await replica();
    const b = await replica();
    const hold = holdRound(1);
    await startRun(a.channel);
    await until(() => openai.requests.some((r) => rounds(r) === 1), 'the batch\'s second LLM call');
    const runner = a.gw.gateway.lanes.isRunning(KEY) ? a : b;
    const other = runner === a ? b : a;
    const stopping = runner.stop();
    hold.released();
    await stopping;
    await until(() => log.filter((l) => l.text === FINAL).length === 1, 'the final answer', 6000);
    await until(async () => (await entry()).runState === 'completed', 'the run to complete');
    // Each of the run's four LLM calls was made once; the answer was sent once, by the replica that is left.
    expect(openai.requests.map(rounds).sort()).toEqual([0, 1, 2, 3]);
    expect(log.filter((l) => l.text === FINAL).map((l) => l.replica)).toEqual([other.name]);
    expect(await resumeEntries()).toBe(1);
  }, 30_000);

  it('a replica that joined after the other\'s last look at the live replicas and stops mid-run: the other is told it left and resumes the run', async () => {
    // A looks at the live replicas when it starts and then every 5 s (pollMs 1000): B comes and goes in between.
    const a = await replica(1000);
    const b = await replica();
    const hold = holdRound(1);
    await startRun(b.channel);
    await until(() => openai.requests.some((r) => rounds(r) === 1), 'the batch\'s second LLM call');
    expect(b.gw.gateway.lanes.isRunning(KEY)).toBe(true);
    const stopping = b.stop();
    hold.released();
    await stopping;
    await until(() => log.filter((l) => l.text === FINAL).length === 1, 'the final answer', 6000);
    expect(log.filter((l) => l.text === FINAL).map((l) => l.replica)).toEqual([a.name]);
    expect(openai.requests.map(rounds).sort()).toEqual([0, 1, 2, 3]);
    expect(await resumeEntries()).toBe(1);
  }, 30_000);

  it('a replica whose lock dies mid-batch (a crash) and then leaves: the other takes the batch over through the queue and queues no resume besides', async () => {
    const a = await replica();
    const b = await replica();
    holdRound(1);
    await startRun(a.channel);
    await until(() => openai.requests.some((r) => rounds(r) === 1), 'the batch\'s second LLM call');
    const runner = a.gw.gateway.lanes.isRunning(KEY) ? a : b;
    const [pid, ...others] = await laneBackends();
    expect(others).toEqual([]);
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    // The crashed replica leaves the cluster: the survivor scans for runs it left behind while it runs the batch again.
    await runner.stop();
    await until(() => log.filter((l) => l.text === FINAL).length === 1, 'the final answer', 6000);
    await until(async () => (await entry()).runState === 'completed', 'the run to complete');
    // The call cut short by the crash ran again (SPEC §13); every other call once; no resume batch.
    expect(openai.requests.map(rounds).sort()).toEqual([0, 1, 1, 2, 3]);
    expect(log.filter((l) => l.text === FINAL)).toHaveLength(1);
    expect(await resumeEntries()).toBe(0);
    expect(openai.requests.filter((r) => lastUser(r).startsWith('[background_auto_resume]'))).toEqual([]);
    // The batch run again is the same batch: two batches in all, not a third one counted against the goal.
    expect((await entry()).checkpoint?.batch).toBe(2);
  }, 30_000);

  it('two replicas starting together with a run left behind resume it once', async () => {
    const first = await replica();
    const hold = holdRound(1);
    await startRun(first.channel);
    await until(() => openai.requests.some((r) => rounds(r) === 1), 'the batch\'s second LLM call');
    const stopping = first.stop();
    hold.released();
    await stopping;
    expect((await entry()).runState).toBe('continuing');
    expect((await db.pool.query('SELECT 1 FROM sb_lane WHERE next_seq > done_seq')).rowCount).toBe(0);

    await Promise.all([replica(), replica()]);
    await until(() => log.filter((l) => l.text === FINAL).length === 1, 'the final answer', 6000);
    await until(async () => (await entry()).runState === 'completed', 'the run to complete');
    expect(openai.requests.map(rounds).sort()).toEqual([0, 1, 2, 3]);
    expect(log.filter((l) => l.text === FINAL)).toHaveLength(1);
    expect(await resumeEntries()).toBe(1);
    const resumes = await db.pool.query(`SELECT 1 FROM sb_inbox WHERE message->'internal'->>'kind' = 'background_auto_resume'`);
    expect(resumes.rowCount).toBe(1);
  }, 30_000);

  it('a session is left behind only with nothing queued and no lock held (an HTTP turn holds the lock without a queued message)', async () => {
    const [idle, queued, locked] = ['agent:main:direct:idle', 'agent:main:direct:queued', 'agent:main:direct:locked'];
    await db.pool.query('INSERT INTO sb_lane (session_key, next_seq, done_seq) VALUES ($1, 3, 3), ($2, 4, 3)', [idle, queued]);
    const holder = new pg.Client({ connectionString: db.uri });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [locked]);
      expect([...await orphanedSessions(db.pool, [idle, queued, locked, 'agent:main:direct:never'])].sort()).toEqual([idle, 'agent:main:direct:never']);
    } finally {
      await holder.end();
    }
    expect([...await orphanedSessions(db.pool, [locked])]).toEqual([locked]);
  });
});
