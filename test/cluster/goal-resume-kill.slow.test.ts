import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { startFakeOpenAI, userText, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { tempDir } from '../helpers/gateway.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { startProcess } from '../helpers/process.ts';
import { until } from '../helpers/wait.ts';

const db = useTestDatabase();
const KEY = 'agent:main:direct:alice';
const FINAL = 'work finished';
const rounds = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
const lastUser = (r: RecordedRequest) => userText([...r.body.messages].reverse().find((m) => m.role === 'user')?.content);

describePg('cluster mode: a web chat goal run whose replica is killed (kill -9) mid-batch', () => {
  let fake: FakeOpenAI;
  const dirs: ReturnType<typeof tempDir>[] = [];
  const procs: ReturnType<typeof startProcess>[] = [];
  beforeEach(async () => { fake = await startFakeOpenAI(); });
  afterEach(async () => {
    for (const p of procs.splice(0)) { p.child.kill('SIGKILL'); await p.exited; }
    for (const d of dirs.splice(0)) d.remove();
    await fake.close();
  });

  function replica(name: string): ReturnType<typeof startProcess> {
    const dir = tempDir();
    dirs.push(dir);
    writeFileSync(path.join(dir.dir, 'switchboard.json'), JSON.stringify({
      store: db.uri, cluster: { pollMs: 100, replicaId: name },
      providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      session: { dmScope: 'per-peer', reset: { mode: 'off' } },
      agents: { defaults: { tools: { preset: 'minimal' }, maxIterationsPerBatch: 2 } },
      backgroundExecution: { enabled: true },
    }));
    const proc = startProcess(dir.dir, { SWITCHBOARD_LOG_LEVEL: 'info' });
    procs.push(proc);
    return proc;
  }

  it('the other replica resumes it once it sees the replica gone: the answer once, every recorded LLM call once', async () => {
    // Four calls make the run (three ask for a tool, the fourth answers); the first try of the second never answers.
    let held = false;
    fake.fallback = (r): FakeReply | Promise<FakeReply> => {
      const n = rounds(r);
      if (n === 1 && !held) { held = true; return new Promise<FakeReply>(() => undefined); }
      return n >= 3 ? { content: FINAL } : { toolCalls: [{ id: `c${n}`, name: 'memory_search', arguments: '{"query":"x"}' }] };
    };
    const a = replica('ka');
    const b = replica('kb');
    const [urlA] = await Promise.all([a.url, b.url]);
    const post = (text: string) => fetch(`${urlA}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text }) });
    expect((await post('/goal finish the work')).status).toBe(200);
    void post('work').catch(() => undefined);
    await until(async () => held && (await db.pool.query(`SELECT 1 FROM sb_transcript_entry WHERE entry->>'role' = 'tool'`)).rowCount === 1, 'the first tool result and the held second call');
    a.child.kill('SIGKILL');
    await a.exited;

    // Nothing is queued for an HTTP turn: the run is found by the survivor's scan once the killed replica stops heart-beating.
    await until(async () => {
      const { rows } = await db.pool.query<{ value: string }>('SELECT value FROM keyv WHERE key = $1', [`sessions:${KEY}`]);
      return rows[0] && (JSON.parse(rows[0].value) as { value: { runState: string } }).value.runState === 'completed';
    }, 'the run to complete on the other replica', 12_000);
    const answers = await db.pool.query(`SELECT 1 FROM sb_transcript_entry WHERE entry->>'role' = 'assistant' AND entry->>'content' = $1`, [FINAL]);
    expect(answers.rowCount).toBe(1);
    // The call cut short by the kill ran again (SPEC §13), from the resume; every recorded call once.
    expect(fake.requests.map(rounds).sort()).toEqual([0, 1, 1, 2, 3]);
    expect(fake.requests.filter((r) => lastUser(r).startsWith('[background_auto_resume]')).map(rounds)).toEqual([1, 2]);
    expect((await db.pool.query(`SELECT 1 FROM sb_inbox WHERE message->'internal'->>'kind' = 'background_auto_resume'`)).rowCount).toBe(1);
    expect(b.lines.some((l) => l.includes('replicas left the cluster'))).toBe(true);
  }, 90_000);
});
