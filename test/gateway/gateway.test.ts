import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import type { RunningGateway } from '../../src/main.ts';
import { conversation, lastUser } from '../fakes/fake-openai.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { useFakeOpenAI, useTempDir } from '../helpers/fixtures.ts';

const telegramOpen = { channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } } };

describe('gateway: lanes, commands, resets, restarts', () => {
  const fake = useFakeOpenAI((r) => ({ content: `re: ${lastUser(r)}` }));
  const tmp = useTempDir();
  let gw: RunningGateway | undefined;
  let channel: TestChannel;
  const env = () => ({ OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-test' });
  const start = (config: Record<string, unknown> = {}, clock?: ManualClock) => {
    channel = new TestChannel();
    return startTestGateway({ dir: tmp.dir, env: env(), config: { ...telegramOpen, ...config }, adapters: [channel], clock });
  };

  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  it('queues messages that arrive during a run and answers them in order', async () => {
    gw = await start();
    fake.script.push({ content: 're: one', delayMs: 150 });
    const subs = [];
    for (const text of ['one', 'two', 'three']) subs.push(await channel.inject(text));
    expect(subs.map((s) => s.status)).toEqual(['accepted', 'accepted', 'accepted']);
    await Promise.all(subs.map((s) => s.done));
    expect(channel.texts()).toEqual(['re: one', 're: two', 're: three']);
    // Each turn saw the previous ones: the third request carries the whole history.
    expect(conversation(fake.requests[2]!)).toEqual(['one', 're: one', 'two', 're: two', 'three']);
    expect(channel.typings.length).toBeGreaterThanOrEqual(3);
  });

  it('/status is answered at once while a turn runs; /stop aborts the run and queued messages are still answered', async () => {
    gw = await start();
    fake.script.push({ content: 'never', delayMs: 10_000 });
    const slow = await channel.inject('think hard');
    const queued = await channel.inject('after');
    await waitFor(() => fake.requests.length === 1);
    const status = await channel.inject('/status');
    await status.done;
    expect(channel.texts()[0]).toMatch(/Status.*agent:main:main[\s\S]*turn: running, 1 queued/);
    const stop = await channel.inject('/stop');
    await stop.done;
    expect(channel.texts()[1]).toMatch(/^Stopped\. 1 queued message will still be answered\./);
    expect((await slow.done)?.outcome).toBe('stopped');
    expect((await queued.done)?.replies[0]?.text).toBe('re: after');
    expect(channel.texts()).toContain('⏹ Stopped.');
  });

  it('a failing turn is answered with a short apology and the lane goes on', async () => {
    gw = await start({ providers: { default: { maxRetries: 0 } } });
    fake.script.push({ status: 500, error: { message: 'upstream exploded' } });
    const a = await channel.inject('first');
    const b = await channel.inject('second');
    await Promise.all([a.done, b.done]);
    expect(channel.texts()[0]).toMatch(/^Sorry, something went wrong while answering that \(ref [0-9a-f]{8}\)/);
    expect(channel.texts()[0]).not.toContain('upstream exploded');
    expect(channel.texts()[1]).toBe('re: second');
  });

  it('/new with text starts a new session whose first message is the text; the old transcript is archived', async () => {
    gw = await start();
    await (await channel.inject('remember 7')).done;
    const before = (await gw.store.get('agent:main:main'))!;
    await (await channel.inject('/NEW what is 2+2')).done;
    const after = (await gw.store.get('agent:main:main'))!;
    expect(after.sessionId).not.toBe(before.sessionId);
    expect(after.lastResetReason).toBe('manual');
    expect(conversation(fake.requests[1]!)).toEqual(['what is 2+2']);
    const files = readdirSync(path.join(tmp.dir, 'data', 'agents', 'main', 'sessions'));
    expect(files.some((f) => f.startsWith(`${before.sessionId}.jsonl.reset.`))).toBe(true);
    expect(files).toContain(`${after.sessionId}.jsonl`);
    await (await channel.inject('/reset')).done;
    expect(channel.texts()[2]).toMatch(/^New session started/);
  });

  it('an automatic daily reset is announced in one line before the reply', async () => {
    const clock = new ManualClock('2026-03-10T10:00:00Z');
    gw = await start({ session: { reset: { mode: 'daily', atHour: 4, timezone: 'UTC' } } }, clock);
    await (await channel.inject('day one')).done;
    const first = (await gw.store.get('agent:main:main'))!.sessionId;
    clock.set('2026-03-10T23:00:00Z');
    await (await channel.inject('same day')).done;
    expect((await gw.store.get('agent:main:main'))!.sessionId).toBe(first);
    clock.set('2026-03-11T04:00:01Z');
    await (await channel.inject('day two')).done;
    const entry = (await gw.store.get('agent:main:main'))!;
    expect(entry.sessionId).not.toBe(first);
    expect(entry.lastResetReason).toBe('daily');
    const last = channel.sent.at(-1)!.message;
    expect(last.notice).toBe('↻ New session: daily reset at 04:00 UTC.');
    expect(last.text).toBe('re: day two');
  });

  it('/timezone moves the daily boundary of that session only', async () => {
    const clock = new ManualClock('2026-03-10T10:00:00Z');
    gw = await start({ session: { reset: { mode: 'daily', atHour: 4, timezone: 'UTC' } } }, clock);
    await (await channel.inject('/timezone Asia/Tokyo')).done;
    expect(channel.texts()[0]).toMatch(/Time zone set to Asia\/Tokyo/);
    await (await channel.inject('hello')).done;
    const id = (await gw.store.get('agent:main:main'))!.sessionId;
    clock.set('2026-03-10T19:30:00Z'); // 04:30 in Tokyo on the 11th: past Tokyo's boundary, not UTC's
    await (await channel.inject('later')).done;
    expect((await gw.store.get('agent:main:main'))!.sessionId).not.toBe(id);
    await (await channel.inject('/timezone Mars/Olympus')).done;
    expect(channel.texts().at(-1)).toMatch(/not an IANA time zone/);
  });

  it('a restart keeps sessions: the next message continues the same session id and history', async () => {
    gw = await start();
    await (await channel.inject('before restart')).done;
    const id = (await gw.store.get('agent:main:main'))!.sessionId;
    await gw.stop();
    gw = await start();
    await (await channel.inject('after restart')).done;
    expect((await gw.store.get('agent:main:main'))!.sessionId).toBe(id);
    expect(conversation(fake.requests[1]!)).toEqual(['before restart', 're: before restart', 'after restart']);
  });

  it('a platform redelivery is processed once, also after a restart', async () => {
    gw = await start();
    const first = await channel.inject('hi', { id: 'm1', deliveryId: 'update-1' });
    await first.done;
    expect((await channel.inject('hi', { id: 'm1', deliveryId: 'update-1' })).status).toBe('duplicate');
    await gw.stop();
    gw = await start();
    expect((await channel.inject('hi', { id: 'm1', deliveryId: 'update-1' })).status).toBe('duplicate');
    expect(fake.requests).toHaveLength(1);
  });

  it('a message accepted but not answered when the gateway stops is replayed at the next start', async () => {
    gw = await start({ gateway: { shutdownGraceMs: 50 } });
    fake.script.push({ content: 'too slow', delayMs: 10_000 });
    await channel.inject('slow one', { id: 'm-slow' });
    const waiting = await channel.inject('waiting one', { id: 'm-wait' });
    await waitFor(() => fake.requests.length === 1);
    await gw.stop();
    expect(await waiting.done).toBeUndefined();
    expect(channel.sent).toHaveLength(0);
    gw = await start();
    await channel.waitForSent(2);
    expect(channel.texts()).toEqual(['re: slow one', 're: waiting one']);
  });

  it('a group message without a mention is kept as context for the next run', async () => {
    gw = await start({ channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open', groupPolicy: 'open' } } });
    const group = { chatType: 'group' as const, chatId: '-100', groupId: '-100' };
    const skipped = await channel.inject('the code is 1234', { ...group, peerId: '7', sender: { id: '7', name: 'Ann' } });
    expect(skipped.status).toBe('skipped');
    await (await channel.inject('what is the code?', { ...group, peerId: '8', sender: { id: '8', name: 'Bob' }, mentionsBot: true })).done;
    expect(lastUser(fake.requests[0]!)).toContain('Ann: the code is 1234');
    expect(channel.sent[0]!.target.chatId).toBe('-100');
    expect(await gw.store.get('agent:main:telegram:group:-100')).toBeDefined();
  });
});

describe('HTTP: auth and start-up rules', () => {
  const tmp = useTempDir();
  let gw: RunningGateway | undefined;
  afterEach(async () => { await gw?.stop(); gw = undefined; });

  it('with an auth token, every route but /healthz needs the bearer token', async () => {
    gw = await startTestGateway({ dir: tmp.dir, config: { gateway: { authToken: 'secret-token-123' } } });
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
    const denied = await fetch(`${gw.url}/admin/sessions`);
    expect(denied.status).toBe(401);
    expect(await denied.json()).toMatchObject({ error: { code: 'unauthorized', type: 'authentication_error' } });
    expect((await fetch(`${gw.url}/admin/sessions`, { headers: { authorization: 'Bearer wrong-token-123' } })).status).toBe(401);
    expect((await fetch(`${gw.url}/admin/sessions`, { headers: { authorization: 'Bearer secret-token-123' } })).status).toBe(200);
  });

  it('refuses to start on a non-loopback host without a token', async () => {
    await expect(startTestGateway({ dir: tmp.dir, config: { gateway: { host: '0.0.0.0' } } })).rejects.toThrow(/authToken/);
  });

  it('answers 413 over maxBodyBytes and 404 for unknown routes and sessions', async () => {
    gw = await startTestGateway({ dir: tmp.dir, config: { gateway: { maxBodyBytes: 100 } } });
    const big = await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'a', text: 'x'.repeat(500) }) });
    expect(big.status).toBe(413);
    expect((await fetch(`${gw.url}/nope`)).status).toBe(404);
    expect((await fetch(`${gw.url}/admin/sessions/${encodeURIComponent('agent:main:direct:ghost')}`)).status).toBe(404);
    expect((await fetch(`${gw.url}/admin/sessions/not-a-key`)).status).toBe(400);
  });

  it('POST /admin/sessions/:key/reset gives the key a new session id', async () => {
    gw = await startTestGateway({ dir: tmp.dir });
    const chat = await (await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'a', text: 'hi' }) })).json() as { sessionKey: string; sessionId: string };
    const reset = await fetch(`${gw.url}/admin/sessions/${encodeURIComponent(chat.sessionKey)}/reset`, { method: 'POST' });
    expect(reset.status).toBe(200);
    const entry = await reset.json() as { sessionId: string; lastResetReason: string };
    expect(entry.sessionId).not.toBe(chat.sessionId);
    expect(entry.lastResetReason).toBe('admin');
    const history = await (await fetch(`${gw.url}/admin/sessions/${encodeURIComponent(chat.sessionKey)}/history`)).json() as { entries: unknown[] };
    expect(history.entries).toEqual([]);
    expect(existsSync(path.join(tmp.dir, 'data', 'agents', 'main', 'sessions'))).toBe(true);
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
