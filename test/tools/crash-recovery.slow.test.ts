import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TranscriptMessage } from '../../src/sessions/transcript.ts';
import { startFakeOpenAI, userText, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { tempDir } from '../helpers/gateway.ts';
import { startProcess as startGatewayProcess } from '../helpers/process.ts';
import { until } from '../helpers/wait.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { sentTo } from '../channels/telegram/harness.ts';
import { dm } from '../channels/telegram/updates.ts';



const startProcess = (dir: string, env: NodeJS.ProcessEnv = {}) => startGatewayProcess(dir, { SWITCHBOARD_LOG_LEVEL: 'info', ...env });

const rounds = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
const firstUser = (r: RecordedRequest) => userText(r.body.messages.find((m) => m.role === 'user')?.content);
const lastUser = (r: RecordedRequest) => userText([...r.body.messages].reverse().find((m) => m.role === 'user')?.content);
const call = (id: string, name: string, args: Record<string, unknown>): FakeReply => ({ toolCalls: [{ id, name, arguments: JSON.stringify(args) }] });


describe('background runs across SIGKILL', () => {
  let tmp: ReturnType<typeof tempDir>;
  let fake: FakeOpenAI;
  let telegram: FakeTelegram | undefined;
  const procs: ReturnType<typeof startProcess>[] = [];
  beforeEach(async () => {
    tmp = tempDir();
    fake = await startFakeOpenAI();
  });
  afterEach(async () => {
    for (const p of procs.splice(0)) { p.child.kill('SIGKILL'); await p.exited; }
    await telegram?.close();
    telegram = undefined;
    await fake.close();
    tmp.remove();
  });
  const configure = (extra: Record<string, unknown>) => writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
    providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
    session: { dmScope: 'per-peer', reset: { mode: 'off' } }, ...extra,
  }));
  /** The first LLM call asks for a tool; the next is held open until the process dies. */
  const holdAfterOneTool = () => {
    fake.fallback = (r): FakeReply | Promise<FakeReply> => (rounds(r) === 0 ? call('c-1', 'memory_search', { query: 'anything' }) : new Promise<FakeReply>(() => undefined));
  };
  const historyOf = async (url: string, key: string) => ((await (await fetch(`${url}/admin/sessions/${encodeURIComponent(key)}/history`)).json()) as { entries: TranscriptMessage[] }).entries;
  const entryOf = async (url: string, key: string) => (await (await fetch(`${url}/admin/sessions/${encodeURIComponent(key)}`)).json()) as { runState: string; goal?: string };

  it('a turn killed mid-run with no goal and background off is not left running: after the restart it is failed and /admin/runs is empty', async () => {
    configure({});
    holdAfterOneTool();
    const first = startProcess(tmp.dir);
    procs.push(first);
    let url = await first.url;
    const key = 'agent:main:direct:alice';
    void fetch(`${url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text: 'work' }) }).catch(() => undefined);
    await until(async () => (await historyOf(url, key)).some((e) => e.role === 'tool') && fake.requests.length === 2, 'the tool result and the held second call');
    expect((await entryOf(url, key)).runState).toBe('running');
    first.child.kill('SIGKILL');
    await first.exited;

    const second = startProcess(tmp.dir);
    procs.push(second);
    url = await second.url;
    await until(async () => (await entryOf(url, key)).runState === 'failed', 'the stale run to be settled');
    expect(await (await fetch(`${url}/admin/runs`)).json()).toEqual({ runs: [] });
    // The session answers again as usual.
    fake.fallback = () => ({ content: 'back again' });
    const reply = await (await fetch(`${url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text: 'hello?' }) })).json() as { reply: string };
    expect(reply.reply).toBe('back again');
    expect((await entryOf(url, key)).runState).toBe('idle');
  }, 60_000);

  it('five goal runs killed mid-batch resume at the next start staggered, never more than maxConcurrentBackgroundTurns (2) at once, and all complete', async () => {
    configure({ agents: { defaults: { maxConcurrent: 8 } }, backgroundExecution: { enabled: true, maxConcurrentBackgroundTurns: 2 } });
    holdAfterOneTool();
    const first = startProcess(tmp.dir);
    procs.push(first);
    let url = await first.url;
    const users = ['u1', 'u2', 'u3', 'u4', 'u5'];
    const post = (user: string, text: string) => fetch(`${url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }) });
    for (const u of users) await post(u, '/goal finish the work');
    for (const u of users) void post(u, 'work').catch(() => undefined);
    await until(() => fake.requests.length === 10 || undefined, 'every run to hold its second call');
    for (const u of users) await until(async () => (await historyOf(url, `agent:main:direct:${u}`)).some((e) => e.role === 'tool'), `${u}'s tool result`);
    first.child.kill('SIGKILL');
    await first.exited;

    let inFlight = 0;
    let most = 0;
    const startedAt: number[] = [];
    fake.fallback = async (r) => {
      if (!lastUser(r).startsWith('[background_auto_resume]')) return { content: 'unexpected' };
      startedAt.push(Date.now());
      inFlight++;
      most = Math.max(most, inFlight);
      // Simulated model latency: long enough that a third resume would overlap two running ones without the limit.
      await new Promise((resolve) => setTimeout(resolve, 700));
      inFlight--;
      return { content: 'work finished' };
    };
    const second = startProcess(tmp.dir);
    procs.push(second);
    url = await second.url;
    for (const u of users) await until(async () => (await entryOf(url, `agent:main:direct:${u}`)).runState === 'completed', `${u} to complete`);
    expect(startedAt).toHaveLength(5);
    expect(most).toBe(2);
    // Staggered: the resumes are queued RESUME_STAGGER_MS (250 ms) apart, so the first two (with two permits free)
    // do not start together (turn start = the log line's time less its duration).
    const turnLines = () => second.lines.flatMap((l) => { try { return [JSON.parse(l) as { channel?: string; msg?: string; time: string; durationMs?: number }]; } catch { return []; } })
      .filter((l) => l.channel === 'internal' && l.msg?.startsWith('turn replied'));
    // A run's entry is saved before its turn's log line is written, and the line reaches us through a pipe later.
    await until(() => turnLines().length >= 5 || undefined, 'the five turn log lines');
    const starts = turnLines().map((l) => Date.parse(l.time) - l.durationMs!).sort((x, y) => x - y);
    expect(starts).toHaveLength(5);
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(200);
    expect(await (await fetch(`${url}/admin/runs`)).json()).toEqual({ runs: [] });
  }, 90_000);

  it('a Telegram goal run killed in its first batch answers once after the restart (the resume and the replayed message do not both run it)', async () => {
    telegram = await startFakeTelegram();
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    configure({ channels: { telegram: { dmPolicy: 'open' } }, backgroundExecution: { enabled: true } });
    const first = startProcess(tmp.dir, env);
    procs.push(first);
    let url = await first.url;
    telegram.pushUpdate(dm('/goal count the items'));
    await telegram.waitFor('sendMessage', (c) => String(c.body.text).startsWith('Goal set'), 20_000);
    holdAfterOneTool();
    telegram.pushUpdate(dm('work'));
    const key = 'agent:main:direct:42';
    await until(async () => (await historyOf(url, key)).some((e) => e.role === 'tool') && fake.requests.length === 2, 'the tool result and the held second call');
    first.child.kill('SIGKILL');
    await first.exited;

    fake.fallback = (r) => (userText([...r.body.messages].reverse().find((m) => m.role === 'user')?.content).endsWith('ping') ? { content: 'pong' } : { content: 'there are 3 items' });
    const second = startProcess(tmp.dir, env);
    procs.push(second);
    url = await second.url;
    await telegram.waitFor('sendMessage', (c) => c.body.text === 'there are 3 items', 20_000);
    // The replayed message (queued on connect) and the resume have both had their turn once "ping" is answered.
    telegram.pushUpdate(dm('ping'));
    await telegram.waitFor('sendMessage', (c) => c.body.text === 'pong', 20_000);
    await until(async () => (await entryOf(url, key)).runState === 'idle' || (await entryOf(url, key)).runState === 'completed', 'the session to settle');
    expect(sentTo(telegram, 42).filter((c) => c.body.text === 'there are 3 items')).toHaveLength(1);
    const messages = (await historyOf(url, key)).filter((e) => e.type === 'message');
    expect(messages.filter((e) => e.role === 'user' && e.content.endsWith('work'))).toHaveLength(1);
    expect(messages.filter((e) => e.role === 'assistant' && e.content === 'there are 3 items')).toHaveLength(1);
  }, 60_000);

  it('a run killed with a tool call in flight resumes at the next start and completes; nothing recorded runs or appears twice', async () => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
      providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      agents: { defaults: { maxIterationsPerBatch: 2 } },
      backgroundExecution: { enabled: true },
      session: { dmScope: 'per-peer', reset: { mode: 'off' } },
    }));
    let releaseChild!: () => void;
    const childHeld = new Promise<void>((resolve) => { releaseChild = resolve; });
    let childKey = '';
    fake.fallback = async (r): Promise<FakeReply> => {
      if (firstUser(r) === 'slow child') {
        if (lastUser(r) === 'report') { await childHeld; return { content: 'child report: 3 items' }; }
        return { content: 'child ready' };
      }
      const n = rounds(r);
      if (n === 0) return call('c-spawn', 'sessions_spawn', { prompt: 'slow child', label: 'kid' });
      if (n === 1) {
        const spawned = r.body.messages.find((m) => m.role === 'tool')!;
        childKey = (JSON.parse(spawned.content!) as { sessionKey: string }).sessionKey;
        return call('c-yield', 'sessions_yield', { sessionKey: childKey, message: 'report', timeoutSeconds: 600 });
      }
      if (n <= 4) return call(`c-note-${n}`, 'memory_write', { note: `- item ${n}` });
      return { content: 'collected every item' };
    };

    const first = startProcess(tmp.dir);
    procs.push(first);
    let url = await first.url;
    const post = (text: string) => fetch(`${url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text }) });
    expect(((await (await post('/goal collect items')).json()) as { reply: string }).reply).toMatch(/^Goal set/);
    void post('work').catch(() => undefined);
    // Kill once the yield is in flight: the parent's call is on disk, the child's answer held open.
    await until(() => fake.requests.some((r) => firstUser(r) === 'slow child' && lastUser(r) === 'report'), 'the yield to reach the child');
    const parentKey = 'agent:main:direct:alice';
    const history = async () => ((await (await fetch(`${url}/admin/sessions/${encodeURIComponent(parentKey)}/history`)).json()) as { entries: TranscriptMessage[] }).entries;
    await until(async () => (await history()).some((e) => e.toolCalls?.[0]?.id === 'c-yield'), 'the yield call to be recorded');
    first.child.kill('SIGKILL');
    await first.exited;

    releaseChild();
    const second = startProcess(tmp.dir);
    procs.push(second);
    url = await second.url;
    const entryOf = async () => (await (await fetch(`${url}/admin/sessions/${encodeURIComponent(parentKey)}`)).json()) as { runState: string; checkpoint?: { batch: number } };
    await until(async () => (await entryOf()).runState === 'completed', 'the resumed run to complete');

    const entries = (await history()).filter((e) => e.type === 'message');
    expect(entries.at(-1)!.content).toBe('collected every item');
    const results = entries.filter((e) => e.role === 'tool');
    const ids = results.map((e) => e.toolCallId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(['c-spawn', 'c-yield', 'c-note-2', 'c-note-3', 'c-note-4']);
    expect(results[1]!.content).toMatch(/^Error: interrupted: the call to sessions_yield was cut short/);
    // No user entry twice; the sub-agent's report (journaled before the kill) and the resume may come in either order.
    const users = entries.filter((e) => e.role === 'user');
    expect(new Set(users.map((e) => e.sourceId)).size).toBe(users.length);
    const kinds = users.map((e) => e.content.split(']')[0]);
    expect(kinds[0]).toBe('work');
    expect(kinds.filter((k) => k === 'work' || k === '[background_auto_resume' || k === '[subagent kid finished').sort()).toEqual(['[background_auto_resume', '[subagent kid finished', 'work']);
    expect(kinds.every((k) => ['work', '[background_auto_resume', '[subagent kid finished', '[background_auto_continue'].includes(k!))).toBe(true);
    // Each note was written once: nothing the transcript recorded ran again.
    const memoryDir = path.join(tmp.dir, 'workspace', 'memory');
    const notes = readdirSync(memoryDir).map((f) => readFileSync(path.join(memoryDir, f), 'utf8')).join('');
    for (const n of [2, 3, 4]) expect(notes.split(`- item ${n}\n`).length - 1).toBe(1);
    // The child's journaled message was replayed without a second user entry.
    const child = ((await (await fetch(`${url}/admin/sessions/${encodeURIComponent(childKey)}/history`)).json()) as { entries: TranscriptMessage[] }).entries;
    await until(async () => {
      const h = ((await (await fetch(`${url}/admin/sessions/${encodeURIComponent(childKey)}/history`)).json()) as { entries: TranscriptMessage[] }).entries;
      return h.some((e) => e.content === 'child report: 3 items') || undefined;
    }, 'the child to answer its replayed message');
    const childUsers = child.filter((e) => e.role === 'user').map((e) => e.content);
    expect(childUsers).toEqual(['slow child', 'report']);
    expect(existsSync(path.join(tmp.dir, 'data', 'inbox.jsonl'))).toBe(true);
  }, 60_000);
});
