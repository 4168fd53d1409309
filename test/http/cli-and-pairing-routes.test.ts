import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { PairingStore } from '../../src/routing/pairing.ts';
import { GatewayClient } from '../../src/cli/gateway-client.ts';
import { remoteAsk } from '../../src/cli/chat.ts';
import { startApiHarness, total, type ApiHarness } from './api-harness.ts';

describe('routes the command line uses while a gateway runs', () => {
  let h: ApiHarness;
  afterEach(async () => { await h?.close(); });

  const webchat = async (text: string, user = 'alice') => (await (await fetch(`${h.gw.url}/webchat/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }),
  })).json()) as { reply: string; sessionId: string };

  it('POST /cli/messages runs a turn on channel cli and streams it as Server-Sent Events', async () => {
    h = await startApiHarness({ fallback: () => ({ content: 'Hello **there**, how are you?' }) });
    const client = new GatewayClient(h.gw.url!);
    const events: { event: string; data: string }[] = [];
    await client.stream('/cli/messages', { user: 'bob', text: 'hi' }, (e) => events.push(e));
    const deltas = events.filter((e) => e.event === 'delta').map((e) => (JSON.parse(e.data) as { text: string }).text);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe('Hello **there**, how are you?');
    expect(JSON.parse(events.at(-1)!.data)).toMatchObject({ sessionKey: 'agent:main:main', reply: 'Hello **there**, how are you?', outcome: 'replied' });
    expect(events.at(-1)!.event).toBe('done');
    const entry = await h.gw.store.get('agent:main:main');
    expect(entry).toMatchObject({ channel: 'cli', messageCount: 2 });
    const ask = remoteAsk(client, 'bob');
    const streamed: string[] = [];
    expect(await ask('/status', (d) => streamed.push(d))).toMatchObject({ streamed: false, reply: expect.stringContaining('**Status**') });
    const bad = await fetch(`${h.gw.url}/cli/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"text":""}' });
    expect(bad.status).toBe(400);
  });

  it('/model refuses a model that is not configured, with the list and a guess', async () => {
    h = await startApiHarness();
    expect((await webchat('/model gpt-tset')).reply).toBe('Model "gpt-tset" is not configured (did you mean "gpt-test"?); nothing changed. 1 model is configured: default/gpt-test.');
    expect((await webchat('/model')).reply).toMatch(/^Model: default\/gpt-test \(the agent's\)\./);
    expect((await webchat('/model gpt-test')).reply).toBe('Model set to default/gpt-test for this conversation. It does not fall back to other models; /model default goes back to the agent\'s.');
  });

  it('/usage shows this session and, apart, the key across resets', async () => {
    h = await startApiHarness();
    await webchat('one');
    await webchat('/new two');
    await webchat('three');
    const usage = (await webchat('/usage')).reply;
    const records = h.ledger().filter((r) => r.sessionKey === 'agent:main:main');
    const ids = [...new Set(records.map((r) => r.sessionId))];
    expect(ids).toHaveLength(2);
    const current = records.filter((r) => r.sessionId === ids[1]);
    const sum = (list: typeof records) => list.reduce((n, r) => n + total(r), 0);
    expect(usage).toMatch(new RegExp(`^• this session \\(since .* UTC, 2 LLM calls\\): input 20 · output 10 · cache read 0 · cache write 0 · total ${sum(current)}$`, 'm'));
    expect(usage).toContain(`• across resets (2 sessions, 3 LLM calls): input 30 · output 15 · cache read 0 · cache write 0 · total ${sum(records)}`);
    expect(usage).toMatch(/^• gateway: 45 tokens in 3 LLM calls · webchat: 45 tokens in 3 calls$/m);
    // The entry keeps the key's totals across resets: they equal the ledger's sum.
    const entry = await h.gw.store.get('agent:main:main');
    expect(entry!.tokens.input + entry!.tokens.output + entry!.tokens.cacheRead + entry!.tokens.cacheWrite).toBe(sum(records));
  });

  it('/admin/pairing lists, approves (unknown channels refused by name) and revokes, and warns about a shared main DM session', async () => {
    h = await startApiHarness({ config: { providers: { default: { maxRetries: 0 } }, channels: { telegram: { botToken: '1:x', enabled: false } } } });
    const store = new PairingStore({ uri: h.gw.config.store, clock: new ManualClock(Date.now()) });
    const a = await store.request('telegram', 'default', '42', 'Alice');
    const b = await store.request('discord', 'default', '77', 'Bob');
    await store.close();
    if (a.status === 'full' || b.status === 'full') throw new Error('unexpected');
    const client = new GatewayClient(h.gw.url!);
    expect((await client.get<{ pending: unknown[] }>('/admin/pairing')).pending).toHaveLength(2);
    const unknown = await client.post('/admin/pairing/approve', { channel: 'telgram', code: a.request.code }).catch((e: unknown) => e);
    expect((unknown as Error).message).toBe('Unknown channel "telgram" (did you mean "telegram"?): pairing works on telegram, discord, slack.');
    expect((unknown as { status: number }).status).toBe(400);
    const first = await client.post<{ peer: { peerId: string }; warning?: string }>('/admin/pairing/approve', { channel: 'telegram', code: a.request.code });
    expect(first.peer.peerId).toBe('42');
    expect(first.warning).toBeUndefined(); // the channels are not enabled: nobody can write yet
  });
});
