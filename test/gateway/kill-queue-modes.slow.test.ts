import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeOpenAI, userText, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { startFakeTelegram, type FakeTelegram } from '../fakes/fake-telegram.ts';
import { tempDir } from '../helpers/gateway.ts';
import { useGatewayProcesses } from '../helpers/process.ts';
import { dm } from '../channels/telegram/updates.ts';
import { pendingInJournal as journalPending } from '../helpers/inbox-journal.ts';
import { until } from '../helpers/wait.ts';

type Entry = { type: string; role?: string; content?: string; sourceId?: string; toolCalls?: unknown[] };

/** The user texts of a request. */
const usersOf = (r: RecordedRequest) => r.body.messages.filter((m) => m.role === 'user').map((m) => userText(m.content));

/** SPEC §16: in every queue mode, across kill -9, each accepted message is in the transcript once and answered. */
describe('SIGKILL in the middle of a collected or steered turn', { timeout: 90_000 }, () => {
  let tmp: ReturnType<typeof tempDir>;
  let openai: FakeOpenAI;
  let telegram: FakeTelegram;
  /** Requests held open (the model "thinking") while the test kills the gateway. */
  let held: ((reply: FakeReply) => void)[];
  beforeEach(async () => {
    tmp = tempDir();
    held = [];
    openai = await startFakeOpenAI();
    telegram = await startFakeTelegram();
  });
  afterEach(async () => {
    for (const answer of held.splice(0)) answer({ content: 'late' });
    await telegram.close();
    await openai.close();
    tmp.remove();
  });
  // Registered after the hook above, so it runs first: the processes die before the fakes close.
  const gateways = useGatewayProcesses();

  const configure = (mode: string) => writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({
    providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
    channels: { telegram: { dmPolicy: 'open', streaming: 'off' } }, session: { reset: { mode: 'off' } },
    agents: { defaults: { tools: { preset: 'minimal' } } }, messages: { queue: { mode, debounceMs: 200 } },
  }));
  const env = () => ({ TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
  const start = async () => {
    const proc = gateways.start(tmp.dir, env());
    await proc.url;
    return proc;
  };
  const kill = async (proc: ReturnType<typeof gateways.start>) => {
    proc.child.kill('SIGKILL');
    await proc.exited;
  };
  /** Every message entry of every transcript under the state folder. */
  const transcripts = (): Entry[] => {
    const dir = path.join(tmp.dir, 'data', 'agents', 'main', 'sessions');
    return readdirSync(dir).filter((f) => f.endsWith('.jsonl')).flatMap((f) => readFileSync(path.join(dir, f), 'utf8').trim().split('\n'))
      .map((l) => JSON.parse(l) as Entry).filter((e) => e.type === 'message');
  };
  const pendingInJournal = () => journalPending(path.join(tmp.dir, 'data'));
  /** Each text's user entry once, with a final answer after it; nothing left pending. */
  const expectEachOnceAndAnswered = (texts: string[]) => {
    const entries = transcripts();
    const users = entries.filter((e) => e.role === 'user');
    expect(users.map((u) => u.content).sort()).toEqual([...texts].sort());
    expect(new Set(users.map((u) => u.sourceId)).size).toBe(users.length);
    for (const u of users) expect(entries.slice(entries.indexOf(u) + 1).some((e) => e.role === 'assistant' && !e.toolCalls?.length), u.content).toBe(true);
    expect(pendingInJournal()).toEqual([]);
  };
  /** True once the gateway has confirmed (taken) the update with this id. */
  const taken = (updateId: number) => telegram.callsOf('getUpdates').some((c) => Number(c.body.offset) > updateId);

  it('collect: killed while the model answers a collected burst; after the restart each message is in the transcript once and answered', async () => {
    configure('collect');
    openai.fallback = (r) => new Promise((answer) => held.push(answer)).then(() => ({ content: `re: ${usersOf(r).join(' + ')}` }));
    const first = await start();
    const texts = ['burst one', 'burst two', 'burst three'];
    for (const text of texts) telegram.pushUpdate(dm(text));
    await until(() => openai.requests.length === 1, 'the collected turn to call the model', 6000);
    expect(usersOf(openai.requests[0]!)).toEqual(texts);
    await kill(first);

    openai.fallback = (r) => ({ content: `re: ${usersOf(r).at(-1)}` });
    await start();
    await until(() => pendingInJournal().length === 0 && telegram.callsOf('sendMessage').length > 0, 'the replay to finish', 6000);
    expectEachOnceAndAnswered(texts);
  });

  it('steer: killed after a message joined the running turn at its tool-call boundary; after the restart each is once and answered', async () => {
    configure('steer');
    const first = await start();
    let requests = 0;
    openai.fallback = () => {
      requests++;
      // The first request is held until the second message is taken, then asks for a tool; the next one is held.
      return new Promise<FakeReply>((answer) => held.push(answer));
    };
    const firstId = telegram.pushUpdate(dm('do the thing'));
    await until(() => requests === 1 && taken(firstId), 'the turn to call the model', 6000);
    const secondId = telegram.pushUpdate(dm('and also this'));
    await until(() => taken(secondId), 'the second message to be taken', 6000);
    held.shift()!({ toolCalls: [{ id: 'call-1', name: 'memory_search', arguments: '{"query":"notes"}' }] });
    await until(() => requests === 2, 'the request after the tool call', 6000);
    expect(usersOf(openai.requests[1]!)).toEqual(['do the thing', 'and also this']);
    await kill(first);

    openai.fallback = (r) => ({ content: `re: ${usersOf(r).at(-1)}` });
    await start();
    await until(() => pendingInJournal().length === 0 && telegram.callsOf('sendMessage').length > 0, 'the replay to finish', 6000);
    expectEachOnceAndAnswered(['do the thing', 'and also this']);
  });
});
