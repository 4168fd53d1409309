// SPEC §16 in cluster mode: in every queue mode, across kill -9 of the replica running the turn, each accepted message
// is in the transcript once and answered (by the replica that takes the session over).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { dm } from '../channels/telegram/updates.ts';
import { startFakeOpenAI, userText, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { useGatewayProcesses } from '../helpers/process.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase({ migrate: false });

type Entry = { type: string; role?: string; content?: string; sourceId?: string; toolCalls?: unknown[] };

/** The user texts of a request. */
const usersOf = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'user').map((m) => userText(m.content));

describePg('cluster mode: SIGKILL in the middle of a collected or steered turn', { timeout: 90_000 }, () => {
  let tmp: ReturnType<typeof tempDir>;
  let openai: FakeOpenAI;
  let telegram: FakeTelegram;
  let held: ((reply: FakeReply) => void)[];
  beforeEach(async () => {
    tmp = tempDir();
    held = [];
    openai = await startFakeOpenAI();
    telegram = await startFakeTelegram();
    await db.pool.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public');
  });
  afterEach(async () => {
    for (const answer of held.splice(0)) answer({ content: 'late' });
    await telegram.close();
    await openai.close();
    tmp.remove();
  });
  // Registered after the hook above, so it runs first: the processes die before the fakes close.
  const gateways = useGatewayProcesses();

  const start = async (id: string, mode: string) => {
    const dir = path.join(tmp.dir, id);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'switchboard.json'), JSON.stringify({
      store: db.uri, cluster: { replicaId: id, pollMs: 200 },
      providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      channels: { telegram: { dmPolicy: 'open', streaming: 'off' } }, session: { reset: { mode: 'off' } },
      agents: { defaults: { tools: { preset: 'minimal' } } }, messages: { queue: { mode, debounceMs: 200 } },
    }));
    const proc = gateways.start(dir, { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    await proc.url;
    return proc;
  };
  const entries = async (): Promise<Entry[]> =>
    (await db.pool.query<{ entry: Entry }>('SELECT entry FROM sb_transcript_entry ORDER BY session_id, n')).rows.map((r) => r.entry).filter((e) => e.type === 'message');
  const pending = async () => (await db.pool.query('SELECT 1 FROM sb_inbox WHERE done_at IS NULL')).rowCount ?? 0;
  /** Each text's user entry once, with a final answer after it; nothing left pending. */
  const expectEachOnceAndAnswered = async (texts: string[]) => {
    const all = await entries();
    const users = all.filter((e) => e.role === 'user');
    expect(users.map((u) => u.content).sort()).toEqual([...texts].sort());
    expect(new Set(users.map((u) => u.sourceId)).size).toBe(users.length);
    for (const u of users) expect(all.slice(all.indexOf(u) + 1).some((e) => e.role === 'assistant' && !e.toolCalls?.length), u.content).toBe(true);
    expect(await pending()).toBe(0);
  };
  const accepted = async (n: number) => (await db.pool.query('SELECT 1 FROM sb_inbox')).rowCount === n;

  it('collect: the replica answering a collected burst is killed; the other one answers each message once', async () => {
    openai.fallback = (r) => new Promise((answer) => held.push(answer)).then(() => ({ content: `re: ${usersOf(r).join(' + ')}` }));
    const first = await start('ra', 'collect');
    await start('rb', 'collect');
    const texts = ['burst one', 'burst two', 'burst three'];
    for (const text of texts) telegram.pushUpdate(dm(text));
    await until(() => openai.requests.length === 1, 'the collected turn to call the model', 10_000);
    expect(usersOf(openai.requests[0]!)).toEqual(texts);
    first.child.kill('SIGKILL');
    await first.exited;

    openai.fallback = (r) => ({ content: `re: ${usersOf(r).at(-1)}` });
    await until(async () => (await pending()) === 0, 'the other replica to answer', 10_000);
    await expectEachOnceAndAnswered(texts);
    expect(telegram.callsOf('sendMessage').length).toBeGreaterThan(0);
  });

  it('steer: the replica is killed after a message joined the running turn; the other one answers each message once', async () => {
    const first = await start('ra', 'steer');
    await start('rb', 'steer');
    openai.fallback = () => new Promise<FakeReply>((answer) => held.push(answer));
    telegram.pushUpdate(dm('do the thing'));
    await until(() => openai.requests.length === 1, 'the turn to call the model', 10_000);
    telegram.pushUpdate(dm('and also this'));
    await until(() => accepted(2), 'the second message accepted', 10_000);
    held.shift()!({ toolCalls: [{ id: 'call-1', name: 'memory_search', arguments: '{"query":"notes"}' }] });
    await until(() => openai.requests.length === 2, 'the request after the tool call', 10_000);
    expect(usersOf(openai.requests[1]!)).toEqual(['do the thing', 'and also this']);
    first.child.kill('SIGKILL');
    await first.exited;

    openai.fallback = (r) => ({ content: `re: ${usersOf(r).at(-1)}` });
    await until(async () => (await pending()) === 0, 'the other replica to answer', 10_000);
    await expectEachOnceAndAnswered(['do the thing', 'and also this']);
  });
});
