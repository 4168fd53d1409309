import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/core/clock.ts';
import type { RunningGateway } from '../../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI, type FakeReply } from '../../fakes/fake-openai.ts';
import { startTestGateway } from '../../helpers/gateway.ts';
import { defaultReply, kindOf } from '../harness.ts';
import { useTempDir } from '../../helpers/fixtures.ts';

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i % 10}`).join(' ');

describe('/context, /compact and POST /admin/sessions/:key/compact', () => {
  let fake: FakeOpenAI;
  const tmp = useTempDir();
  let gw: RunningGateway | undefined;
  const clock = new ManualClock('2026-05-04T08:00:00Z');

  beforeEach(async () => {
    fake = await startFakeOpenAI((r): FakeReply => {
      if (kindOf(r) !== 'memory-flush') return defaultReply(r);
      if (r.body.messages.at(-1)!.role === 'tool') return { content: '', usage: null };
      return { toolCalls: [{ id: 'm1', name: 'memory_write', arguments: JSON.stringify({ note: '- Alice likes short answers' }) }], usage: null };
    });
    const ws = path.join(tmp.dir, 'workspace');
    mkdirSync(ws, { recursive: true });
    writeFileSync(path.join(ws, 'AGENTS.md'), 'Answer briefly.');
    writeFileSync(path.join(ws, 'SOUL.md'), 'Calm. '.repeat(1000));
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await fake.close();
  });

  const start = (compaction: Record<string, unknown> = {}, contextWindow = 16000) => startTestGateway({
    dir: tmp.dir, clock,
    config: {
      providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', contextWindow, maxRetries: 0 } },
      agents: { defaults: { bootstrapMaxChars: 2000, compaction: { reserveTokens: 4000, keepRecentTokens: 200, memoryFlush: false, ...compaction } } },
      session: { reset: { mode: 'off', timezone: 'UTC' } },
    },
  });
  const post = async (text: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`${gw!.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ user: 'alice', text }) });
    return headers.accept ? response.text() : ((await response.json()) as { reply: string }).reply;
  };

  it('/context list shows each bootstrap file, the components and the window; detail adds the largest messages', async () => {
    gw = await start();
    await post('hello there');
    const list = await post('/context list');
    expect(list).toContain('• AGENTS.md: OK · 15 chars · 3 tokens');
    expect(list).toMatch(/• SOUL\.md: TRUNCATED · 6,000 raw → [\d,]+ injected chars · [\d,]+ tokens/);
    for (const name of ['IDENTITY.md', 'USER.md', 'TOOLS.md', 'HEARTBEAT.md']) expect(list).toContain(`• ${name}: MISSING`);
    expect(list).toMatch(/• used: [\d,]+ \/ 16,000 tokens/);
    expect(list).toMatch(/• system [\d,]+ · bootstrap [\d,]+ · tools [\d,]+ · history [\d,]+ · tool results 0 · user input [\d,]+ · total [\d,]+/);
    expect(list).not.toContain('Largest messages');
    expect(await post('/context')).toBe(list);

    const detail = await post('/context detail');
    expect(detail).toContain('**Largest messages**');
    expect(detail).toContain('• #0 system prompt');
    // The default preset (messaging): the session and memory tools, each with its schema's cost.
    expect(detail).toMatch(/\*\*Tool schemas\*\*\n• sessions_spawn · [\d,]+ tokens\n• sessions_yield · [\d,]+ tokens\n• sessions · [\d,]+ tokens\n• memory_write · [\d,]+ tokens\n• memory_search · [\d,]+ tokens\n• send_file · [\d,]+ tokens$/);
    expect(await post('/context nonsense')).toBe('Usage: /context [list|detail]');
    // Commands are not sent to the model.
    expect(fake.requests).toHaveLength(1);
  });

  it('/compact answers "Compacted: X → Y tokens", and /status shows the count', async () => {
    gw = await start();
    for (let i = 0; i < 6; i++) await post(`point ${i}: ${words(80)}`);
    const reply = await post('/compact keep the numbers');
    const m = /^Compacted: ([\d,]+) → ([\d,]+) tokens$/.exec(reply);
    expect(m).not.toBeNull();
    const before = Number(m![1]!.replace(/,/g, ''));
    const after = Number(m![2]!.replace(/,/g, ''));
    expect(after).toBeLessThan(before);
    const summaryCall = fake.requests.at(-1)!;
    expect(kindOf(summaryCall)).toBe('compaction');
    expect(summaryCall.body.messages.at(-1)!.content).toContain('Additional instructions for this summary: keep the numbers');
    const status = await post('/status');
    expect(status).toContain('• compactions: 1');
    expect(status).toContain(`• context: ${after.toLocaleString('en-US')} / 16,000 tokens`);
    expect(await post('/compact')).toMatch(/^Nothing to compact/);
  });

  it('POST /admin/sessions/:key/compact compacts like /compact; an unknown key is a 404', async () => {
    gw = await start();
    for (let i = 0; i < 6; i++) await post(`point ${i}: ${words(80)}`);
    const url = `${gw.url}/admin/sessions/${encodeURIComponent('agent:main:main')}/compact`;
    const response = await fetch(url, { method: 'POST' });
    expect(response.status).toBe(200);
    const body = await response.json() as { compacted: boolean; tokensBefore: number; tokensAfter: number; message: string; compactionCount: number };
    expect(body).toMatchObject({ compacted: true, compactionCount: 1 });
    expect(body.message).toBe(`Compacted: ${body.tokensBefore.toLocaleString('en-US')} → ${body.tokensAfter.toLocaleString('en-US')} tokens`);
    const history = await (await fetch(`${gw.url}/admin/sessions/${encodeURIComponent('agent:main:main')}/history`)).json() as { entries: { type: string }[] };
    expect(history.entries.filter((e) => e.type === 'compaction')).toHaveLength(1);
    expect(history.entries.filter((e) => e.type === 'message')).toHaveLength(12);
    const missing = await fetch(`${gw.url}/admin/sessions/${encodeURIComponent('agent:main:webchat:direct:nobody')}/compact`, { method: 'POST' });
    expect(missing.status).toBe(404);
  });

  it('a memory flush before compaction streams nothing to a streaming chat', async () => {
    gw = await start({ memoryFlush: true, reserveTokens: 2000 }, 4000);
    for (let i = 0; i < 3; i++) await post(`point ${i}`);
    expect(fake.requests.map(kindOf)).toEqual(['turn', 'turn', 'turn']);
    const sse = await post(`stream it: ${words(700)}`, { accept: 'text/event-stream' });
    expect(fake.requests.slice(3).map(kindOf)).toEqual(['memory-flush', 'memory-flush', 'compaction', 'turn']);
    expect(sse).not.toContain('Alice likes');
    const deltas = sse.split('\n\n').filter((b) => b.includes('event: delta')).map((b) => JSON.parse(/data: (.*)/.exec(b)![1]!).text).join('');
    expect(deltas).toBe('ok');
    expect(readFileSync(path.join(tmp.dir, 'workspace', 'memory', '2026-05-04.md'), 'utf8')).toContain('- Alice likes short answers');
  });
});
