import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeOpenAI, userText, type FakeOpenAI } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { tempDir } from '../helpers/gateway.ts';
import { startProcess } from '../helpers/process.ts';
import { dm } from '../channels/telegram/updates.ts';

const users = [101, 102, 103, 104].map((id) => ({ id, is_bot: false, first_name: `U${id}` }));

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 6000 && !condition(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!condition()) throw new Error(`timed out waiting for ${what}`);
}

describe('SIGKILL at awkward moments, then replay', () => {
  let tmp: ReturnType<typeof tempDir>;
  let openai: FakeOpenAI;
  let telegram: FakeTelegram;
  const procs: ReturnType<typeof startProcess>[] = [];
  beforeEach(async () => {
    tmp = tempDir();
    openai = await startFakeOpenAI((r) => ({ content: `echo: ${userText(r.body.messages.at(-1)!.content)}`, usage: null }));
    telegram = await startFakeTelegram();
  });
  afterEach(async () => {
    for (const p of procs.splice(0)) { p.child.kill('SIGKILL'); await p.exited; }
    await telegram.close();
    await openai.close();
    tmp.remove();
  });

  /** Starts the gateway once more and waits until every text has its echo at the platform; its URL. */
  async function restartUntilAnswered(env: Record<string, string>, texts: readonly string[]): Promise<string> {
    const last = startProcess(tmp.dir, env);
    procs.push(last);
    const url = await last.url;
    const answered = () => new Set(telegram.callsOf('sendMessage').map((c) => String(c.body.text)));
    await until(() => texts.every((t) => answered().has(`echo: ${t}`)), 'every message to be answered');
    return url;
  }

  it('killed mid-turn and right after a reply: every message answered, no user entry twice, no orphan transcript, repeats only in the send window', async () => {
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
      providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } },
      agents: { defaults: { tools: { preset: 'none' } } },
    }));
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    const texts: string[] = [];
    let kills = 0;
    // How many sends the platform had received at each kill: a reply can repeat only if it was in flight then.
    const sendsAtKill: number[] = [];
    // Each round: queue messages, then kill at a chosen moment (an LLM call in flight, or just after a reply went out).
    const moments: (() => Promise<unknown>)[] = [
      () => until(() => openai.requests.length >= 3, 'a third LLM call'),
      () => telegram.waitFor('sendMessage', () => telegram.callsOf('sendMessage').length >= 5, 20_000),
      () => until(() => openai.requests.length >= 9, 'a ninth LLM call'),
    ];
    for (const [round, moment] of moments.entries()) {
      const proc = startProcess(tmp.dir, env);
      procs.push(proc);
      await proc.url;
      for (const [i, from] of users.entries()) {
        const text = `r${round} m${i}`;
        texts.push(text);
        telegram.pushUpdate(dm(text, { from }));
      }
      await moment();
      proc.child.kill('SIGKILL');
      await proc.exited;
      sendsAtKill.push(telegram.callsOf('sendMessage').length);
      kills++;
    }
    const url = await restartUntilAnswered(env, texts);

    const sends = telegram.callsOf('sendMessage').map((c) => String(c.body.text));
    // The send window: the platform accepted a reply, the process died before journaling it. With one lane per
    // user, up to one reply per user can be in that window at each kill, and only the last ones sent before it.
    const repeats = sends.length - new Set(sends).size;
    expect(repeats).toBeLessThanOrEqual(kills * users.length);
    const inFlightAtAKill = (index: number) => sendsAtKill.some((n) => index < n && index >= n - users.length);
    for (const [index, text] of sends.entries()) {
      if (sends.indexOf(text) !== index) continue;
      const copies = sends.filter((s) => s === text).length;
      if (copies > 1) expect({ text, inFlightAtAKill: inFlightAtAKill(index) }).toEqual({ text, inFlightAtAKill: true });
      expect(copies).toBeLessThanOrEqual(1 + kills);
    }

    const sessions = ((await (await fetch(`${url}/admin/sessions`)).json()) as { sessions: { key: string; sessionId: string }[] }).sessions;
    expect(sessions).toHaveLength(users.length);
    const folder = path.join(tmp.dir, 'data', 'agents', 'main', 'sessions');
    const files = readdirSync(folder).filter((f) => f.endsWith('.jsonl'));
    // No orphan: every transcript file is the current transcript of a session.
    expect(files.sort()).toEqual(sessions.map((s) => `${s.sessionId}.jsonl`).sort());
    for (const s of sessions) {
      const file = path.join(folder, `${s.sessionId}.jsonl`);
      expect(existsSync(file)).toBe(true);
      const users = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { role?: string; sourceId?: string; content?: string }).filter((e) => e.role === 'user');
      expect(new Set(users.map((u) => u.sourceId)).size).toBe(users.length);
      expect(new Set(users.map((u) => u.content)).size).toBe(users.length);
    }
  }, 120_000);

  it('sixteen chats answered in one burst (their entry saves share a group commit), killed in the burst: every message answered, entries and transcripts agree', async () => {
    const chats = Array.from({ length: 16 }, (_, i) => ({ id: 201 + i, is_bot: false, first_name: `B${i}` }));
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
      providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      channels: { telegram: { dmPolicy: 'open' } }, session: { dmScope: 'per-peer', reset: { mode: 'off' } },
      agents: { defaults: { tools: { preset: 'none' }, maxConcurrent: 16 } },
    }));
    // The fake holds every call until all sixteen of a round are in, then answers them at once: the turns
    // settle in one loop turn of the gateway, and all but the first of their entry saves wait for one commit.
    let held: (() => void)[] = [];
    let releaseAt = chats.length;
    openai.fallback = (r) => new Promise((resolve) => {
      held.push(() => resolve({ content: `echo: ${userText(r.body.messages.at(-1)!.content)}`, usage: null }));
      if (held.length >= releaseAt) for (const answer of held.splice(0)) answer();
    });
    const env = { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot };
    const texts: string[] = [];
    const sendsAtKill: number[] = [];
    // Round 0: killed as the burst's first reply reaches the platform. Round 1: killed as the burst is answered.
    const moments: ((sendsBefore: number) => Promise<unknown>)[] = [
      (before) => telegram.waitFor('sendMessage', () => telegram.callsOf('sendMessage').length > before, 20_000),
      () => until(() => held.length === 0 && openai.requests.length >= 2 * chats.length, 'the second burst to be answered'),
    ];
    for (const [round, moment] of moments.entries()) {
      const proc = startProcess(tmp.dir, env);
      procs.push(proc);
      await proc.url;
      const before = telegram.callsOf('sendMessage').length;
      for (const [i, from] of chats.entries()) {
        texts.push(`b${round} m${i}`);
        telegram.pushUpdate(dm(`b${round} m${i}`, { from }));
      }
      await moment(before);
      proc.child.kill('SIGKILL');
      await proc.exited;
      sendsAtKill.push(telegram.callsOf('sendMessage').length);
      held = [];
    }
    releaseAt = 1; // the replays answer one by one
    const url = await restartUntilAnswered(env, texts);

    // A reply repeats only if the platform had it when the process died: at most one per chat per kill.
    const sends = telegram.callsOf('sendMessage').map((c) => String(c.body.text));
    for (const text of new Set(sends)) expect(sends.filter((s) => s === text).length).toBeLessThanOrEqual(1 + sendsAtKill.length);
    expect(sends.length - new Set(sends).size).toBeLessThanOrEqual(sendsAtKill.length * chats.length);

    const sessions = ((await (await fetch(`${url}/admin/sessions?limit=100`)).json()) as { sessions: { key: string; sessionId: string }[] }).sessions;
    expect(sessions).toHaveLength(chats.length);
    const folder = path.join(tmp.dir, 'data', 'agents', 'main', 'sessions');
    expect(readdirSync(folder).filter((f) => f.endsWith('.jsonl')).sort()).toEqual(sessions.map((s) => `${s.sessionId}.jsonl`).sort());
    // What is on disk now (each reply went out after its entry's commit): the entry counts what its transcript holds.
    const db = new Database(path.join(tmp.dir, 'data', 'sessions.sqlite'), { readonly: true });
    const stored = new Map((db.prepare(`SELECT value FROM keyv WHERE key LIKE 'sessions:%'`).all() as { value: string }[])
      .map((row) => (JSON.parse(row.value) as { value: { sessionId: string; messageCount: number } }).value).map((e) => [e.sessionId, e.messageCount]));
    db.close();
    for (const s of sessions) {
      const entries = readFileSync(path.join(folder, `${s.sessionId}.jsonl`), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type?: string; role?: string; sourceId?: string; content?: string });
      expect(stored.get(s.sessionId)).toBe(entries.filter((e) => e.type === 'message').length);
      const userEntries = entries.filter((e) => e.role === 'user');
      // Each chat's two messages, once each, each with its answer.
      expect(userEntries).toHaveLength(2);
      expect(new Set(userEntries.map((u) => u.sourceId)).size).toBe(2);
      expect(entries.filter((e) => e.role === 'assistant').map((e) => e.content).sort()).toEqual(userEntries.map((u) => `echo: ${u.content}`).sort());
    }
  }, 120_000);
});
