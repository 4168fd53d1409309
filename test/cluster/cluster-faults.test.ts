import { afterEach, beforeEach, expect, it } from 'vitest';
import type { RunningGateway } from '../../src/main.ts';
import type { PgWorkQueue } from '../../src/cluster/pg-work-queue.ts';
import { userText, type FakeReply } from '../fakes/fake-openai.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { useFakeOpenAI } from '../helpers/fixtures.ts';

const db = useTestDatabase();

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The backend pids holding a session lock in the test database (a lane connection each). */
async function laneBackends(): Promise<number[]> {
  const { rows } = await db.pool.query<{ pid: number }>(`SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
    WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()`);
  return rows.map((r) => r.pid);
}

describePg('cluster mode under faults', () => {
  const running: { gw: RunningGateway; remove: () => void }[] = [];
  const openai = useFakeOpenAI((r) => ({ content: `echo: ${userText(r.body.messages.at(-1)!.content)}`, usage: null }));
  let log: { replica: string; chatId: string; text: string }[];
  let names = 0;
  beforeEach(async () => {
    log = [];
    await db.pool.query('TRUNCATE sb_lane, sb_inbox, sb_delivery, sb_transcript, sb_transcript_entry, keyv CASCADE');
  });
  afterEach(async () => {
    for (const r of running.splice(0)) { await r.gw.stop(); r.remove(); }
  });

  async function replica(channelSend?: (replica: string) => Promise<void>): Promise<{ gw: RunningGateway; channel: TestChannel; name: string; queue: PgWorkQueue }> {
    const tmp = tempDir();
    const name = `r${++names}`;
    const channel = new TestChannel('telegram');
    const send = channel.send.bind(channel);
    channel.send = async (target, message) => {
      log.push({ replica: name, chatId: target.chatId, text: message.text });
      await channelSend?.(name);
      await send(target, message);
    };
    const gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel],
      config: {
        store: db.uri, cluster: { pollMs: 100, replicaId: name },
        providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } }, agents: { defaults: { tools: { preset: 'none' } } },
      },
    });
    running.push({ gw, remove: tmp.remove });
    const queue = (gw.gateway as unknown as { options: { queue: PgWorkQueue } }).options.queue;
    return { gw, channel, name, queue };
  }

  async function userEntries(): Promise<string[]> {
    const { rows } = await db.pool.query<{ content: string }>(`SELECT e.entry->>'content' AS content FROM sb_transcript_entry e WHERE e.entry->>'role' = 'user' ORDER BY e.n`);
    return rows.map((r) => r.content);
  }

  it('a lane connection killed mid-turn: that replica sends nothing, another runs the message again and answers once', async () => {
    let release!: (reply: FakeReply) => void;
    let first = true;
    openai.fallback = (r) => {
      if (!first) return { content: `echo: ${userText(r.body.messages.at(-1)!.content)}`, usage: null };
      first = false;
      return new Promise<FakeReply>((resolve) => { release = resolve; });
    };
    const a = await replica();
    const b = await replica();
    await a.channel.inject('hello there', { peerId: '7', chatId: '7', id: 'u1' });
    await until(() => openai.requests.length === 1, 'the first LLM call');
    const [pid, ...others] = await laneBackends();
    expect(others).toEqual([]);
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    release({ content: 'echo: hello there (from the replica that lost its lock)', usage: null });
    await until(() => log.length >= 1, 'a reply');
    await until(async () => (await db.pool.query('SELECT 1 FROM sb_lane WHERE done_seq = 1')).rowCount === 1, 'the message marked done');
    expect(log.map((l) => l.text)).toEqual(['echo: hello there']);
    expect(openai.requests).toHaveLength(2);
    expect(await userEntries()).toHaveLength(1);
    const stats = [a.queue.stats, b.queue.stats];
    expect(stats.reduce((n, s) => n + s.reruns, 0)).toBe(1);
    expect(stats.reduce((n, s) => n + s.leaseLosses, 0)).toBeGreaterThanOrEqual(1);
  }, 30_000);

  it('cut between the platform taking a reply and its record: the next owner sends the recorded answer without calling the model again, and counts the window', async () => {
    let cut = true;
    const a = await replica(async () => {
      if (!cut) return;
      cut = false;
      for (const pid of await laneBackends()) await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    });
    const b = await replica(async () => {
      if (!cut) return;
      cut = false;
      for (const pid of await laneBackends()) await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    });
    await a.channel.inject('remember me', { peerId: '8', chatId: '8', id: 'u2' });
    await until(() => log.length >= 2, 'the reply sent again by the next owner');
    await until(async () => (await db.pool.query('SELECT 1 FROM sb_lane WHERE done_seq = 1')).rowCount === 1, 'the message marked done');
    expect(log.map((l) => l.text)).toEqual(['echo: remember me', 'echo: remember me']);
    expect(openai.requests).toHaveLength(1);
    expect(a.queue.stats.duplicateWindows + b.queue.stats.duplicateWindows).toBe(1);
    expect(await userEntries()).toHaveLength(1);
  }, 30_000);

  it('/stop sent to one replica stops the turn another replica is running', async () => {
    openai.fallback = () => new Promise<FakeReply>(() => undefined);
    const a = await replica();
    const b = await replica();
    await a.channel.inject('think for a long time', { peerId: '4', chatId: '4', id: 'long' });
    await until(() => openai.requests.length === 1, 'the LLM call');
    const key = 'agent:main:direct:4';
    await until(() => a.gw.gateway.lanes.isRunning(key) || b.gw.gateway.lanes.isRunning(key), 'the turn to run');
    const other = a.gw.gateway.lanes.isRunning(key) ? b : a;
    expect(other.gw.gateway.lanes.isRunning(key)).toBe(false);
    await other.channel.inject('/stop', { peerId: '4', chatId: '4', id: 'stop' });
    await until(() => log.some((l) => l.text.includes('Stopped')), 'the stopped turn to say so');
    expect(log.filter((l) => l.text.includes('Stopped'))).toHaveLength(1);
    await until(async () => (await db.pool.query('SELECT 1 FROM sb_lane WHERE done_seq = 1')).rowCount === 1, 'the stopped message marked done');
  }, 30_000);

  it('a message queued without a notification is found by polling', async () => {
    const a = await replica();
    const message = {
      id: 'quiet', channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: '5', peerId: '5',
      sender: { id: '5', name: 'five' }, text: 'no bell rang', attachments: [], mentionsBot: false, receivedAt: Date.now(),
    };
    const key = 'agent:main:telegram:direct:5';
    await db.pool.query(`WITH l AS (INSERT INTO sb_lane (session_key, next_seq) VALUES ($1, 1) RETURNING next_seq)
      INSERT INTO sb_inbox (session_key, seq, delivery_key, message, correlation_id) SELECT $1, next_seq, 'telegram:default:quiet', $2, 'c-quiet' FROM l`, [key, JSON.stringify(message)]);
    await until(() => log.length === 1, 'the polled message to be answered');
    expect(log[0]).toMatchObject({ replica: a.name, chatId: '5', text: 'echo: no bell rang' });
  }, 30_000);

  it('sessions other replicas are running do not hide one nobody runs from the scan', async () => {
    const pending = (key: string, id: string, chat: string, agoSeconds: number) => db.pool.query(`
      WITH l AS (INSERT INTO sb_lane (session_key, next_seq, ready_at) VALUES ($1, 1, now() - make_interval(secs => $4)) RETURNING next_seq)
      INSERT INTO sb_inbox (session_key, seq, delivery_key, message, correlation_id) SELECT $1, next_seq, $2, $3, 'c' FROM l`,
    [key, `telegram:default:${id}`, JSON.stringify({
      id, channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: chat, peerId: chat,
      sender: { id: chat, name: chat }, text: `text of ${id}`, attachments: [], mentionsBot: false, receivedAt: Date.now(),
    }), agoSeconds]);
    // 80 sessions with older work, all held by another (live) replica: one connection holding their locks.
    const busy = Array.from({ length: 80 }, (_, i) => `agent:main:direct:busy${i}`);
    for (const [i, key] of busy.entries()) await pending(key, `busy-${i}`, `busy${i}`, 600 - i);
    const other = await db.pool.connect();
    try {
      await other.query('SELECT pg_advisory_lock(hashtextextended(k, 0)) FROM unnest($1::text[]) AS k', [busy]);
      await pending('agent:main:direct:5', 'free', '5', 1);
      await replica();
      await until(() => log.some((l) => l.chatId === '5'), 'the free session to be answered');
      expect(log.filter((l) => l.chatId.startsWith('busy'))).toEqual([]);
    } finally {
      await other.query('SELECT pg_advisory_unlock_all()');
      other.release();
    }
  }, 30_000);

  it('100 concurrent copies of one delivery, half to each replica: one accepted', async () => {
    const a = await replica();
    const b = await replica();
    const copies = await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 ? a : b).channel.inject('once', { peerId: '6', chatId: '6', id: 'same' })));
    expect(copies.filter((c) => c.status === 'accepted')).toHaveLength(1);
    await until(() => log.length === 1, 'the one reply');
    expect((await db.pool.query('SELECT count(*)::int AS n FROM sb_inbox')).rows[0]).toEqual({ n: 1 });
  }, 30_000);

  it('every database connection cut mid-load (as a PostgreSQL restart does): nothing accepted is lost or answered twice', async () => {
    openai.fallback = (r) => ({ content: `echo: ${userText(r.body.messages.at(-1)!.content)}`, usage: null, delayMs: 30 });
    const a = await replica();
    const b = await replica();
    const accepted: string[] = [];
    const send = async (i: number) => {
      const text = `m${i}`;
      const via = i % 2 ? a : b;
      for (let attempt = 0; attempt < 50; attempt++) {
        // A platform resends what was not acknowledged; the delivery id makes the resend a duplicate if it got in.
        const status = await via.channel.inject(text, { peerId: String(i % 10), chatId: String(i % 10), id: `load-${i}` }).then((s) => s.status, () => 'error');
        if (status === 'accepted' || status === 'duplicate') { accepted.push(text); return; }
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const load = Promise.all(Array.from({ length: 60 }, (_, i) => new Promise((r) => setTimeout(r, i * 10)).then(() => send(i))));
    await until(() => log.length >= 10, 'some replies');
    await db.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
    await load;
    expect(accepted).toHaveLength(60);
    await until(() => new Set(log.map((l) => l.text)).size === 60, 'every message answered', 30_000);
    const users = await userEntries();
    expect(new Set(users).size).toBe(users.length);
    expect(users).toHaveLength(60);
  }, 60_000);
});

describePg('cluster queue retention', () => {
  it('forgets delivery ids after the dedupe window and finished messages after their retention, keeps the rest', async () => {
    const { PgWorkQueue } = await import('../../src/cluster/pg-work-queue.ts');
    await db.pool.query('TRUNCATE sb_lane, sb_inbox, sb_delivery CASCADE');
    await db.pool.query(`INSERT INTO sb_delivery (delivery_key, at, outcome) VALUES
      ('old', now() - interval '49 hours', 'accepted'), ('recent', now() - interval '47 hours', 'accepted')`);
    const message = JSON.stringify({ id: 'x' });
    await db.pool.query(`INSERT INTO sb_inbox (session_key, seq, delivery_key, message, correlation_id, done_at) VALUES
      ('k', 1, 'd1', $1, 'c', now() - interval '25 hours'), ('k', 2, 'd2', $1, 'c', now() - interval '23 hours'), ('k', 3, 'd3', $1, 'c', NULL)`, [message]);
    const queue = new PgWorkQueue({ pool: db.pool, locks: undefined as never, listener: undefined as never, replicaId: 'r', logger: undefined as never, maxClaims: 1, pollMs: 1000 });
    expect(await queue.prune()).toEqual({ deliveries: 1, messages: 1 });
    expect((await db.pool.query('SELECT delivery_key FROM sb_delivery')).rows).toEqual([{ delivery_key: 'recent' }]);
    expect((await db.pool.query('SELECT seq FROM sb_inbox ORDER BY seq')).rows).toEqual([{ seq: '2' }, { seq: '3' }]);
  });
});
