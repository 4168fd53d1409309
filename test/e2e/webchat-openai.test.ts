import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { conversation, lastUser } from '../fakes/fake-openai.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import type { RunningGateway } from '../../src/main.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

describe('end to end: webchat → gateway → openai provider → fake OpenAI', () => {
  const fake = useFakeOpenAI((r) => ({ content: `You said: ${lastUser(r)}` }));
  const tmp = useTempDir();
  let gw: RunningGateway | undefined;
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const post = (body: unknown, headers: Record<string, string> = {}) => fetch(`${gw!.url}/webchat/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body),
  });

  it('answers a web chat message through the real openai client and writes the transcript and entry to disk', async () => {
    gw = await startTestGateway({ dir: tmp.dir, env: { OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-test', OPENAI_MODEL: 'gpt-test' } });
    const response = await post({ user: 'alice', text: 'hello gateway' });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { sessionKey: string; reply: string; sessionId: string };
    expect(body.sessionKey).toBe('agent:main:main');
    expect(body.reply).toBe('You said: hello gateway');
    expect(response.headers.get('x-correlation-id')).toBeTruthy();

    expect(fake.requests).toHaveLength(1);
    const request = fake.requests[0]!;
    expect(request.headers.authorization).toBe('Bearer sk-test');
    expect(request.body.model).toBe('gpt-test');
    expect(request.body.messages[0]?.role).toBe('system');
    expect(request.headers['x-switchboard-correlation-id']).toBe(response.headers.get('x-correlation-id'));

    const dir = path.join(tmp.dir, 'data', 'agents', 'main', 'sessions');
    const lines = readFileSync(path.join(dir, `${body.sessionId}.jsonl`), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ type: 'session', version: 1, sessionId: body.sessionId, key: 'agent:main:main' });
    expect(lines.slice(1).map((l) => [l.role, l.content])).toEqual([['user', 'hello gateway'], ['assistant', 'You said: hello gateway']]);
    expect(readdirSync(dir)).toEqual([`${body.sessionId}.jsonl`]);

    const entry = await (await fetch(`${gw.url}/admin/sessions/${encodeURIComponent(body.sessionKey)}`)).json() as Record<string, unknown>;
    expect(entry).toMatchObject({ key: 'agent:main:main', sessionId: body.sessionId, channel: 'webchat', messageCount: 2, tokens: { input: 10, output: 5, cacheRead: 0, cacheWrite: 0 } });
    // The entry is in SQLite, not only in memory.
    expect(await gw.store.get('agent:main:main')).toMatchObject({ sessionId: body.sessionId, messageCount: 2 });
  });

  it('sends the history of the session with the next message', async () => {
    gw = await startTestGateway({ dir: tmp.dir, env: { OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-test' } });
    await post({ user: 'bob', text: 'first' });
    await post({ user: 'bob', text: 'second' });
    expect(conversation(fake.requests[1]!)).toEqual(['first', 'You said: first', 'second']);
    expect(fake.requests[1]!.body.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
  });

  it('streams the reply as server-sent events', async () => {
    gw = await startTestGateway({ dir: tmp.dir, env: { OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-test' } });
    const response = await post({ user: 'carol', text: 'stream please' }, { accept: 'text/event-stream' });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const text = await response.text();
    const events = text.trim().split('\n\n').map((block) => ({ event: /event: (\w+)/.exec(block)?.[1], data: JSON.parse(/data: (.*)/.exec(block)![1]!) }));
    const deltas = events.filter((e) => e.event === 'delta').map((e) => e.data.text).join('');
    expect(deltas).toBe('You said: stream please');
    expect(events.at(-1)).toMatchObject({ event: 'done', data: { reply: 'You said: stream please', sessionKey: 'agent:main:main' } });
  });

  it('answers with a short apology when the provider fails, and the next message still works', async () => {
    gw = await startTestGateway({ dir: tmp.dir, env: { OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-test' }, config: { providers: { default: { maxRetries: 0 } } } });
    fake.script.push({ status: 500, error: { message: 'boom' } });
    const failed = (await (await post({ user: 'dave', text: 'one' })).json()) as { reply: string };
    expect(failed.reply).toMatch(/^Sorry, something went wrong/);
    const ok = (await (await post({ user: 'dave', text: 'two' })).json()) as { reply: string };
    expect(ok.reply).toBe('You said: two');
  });

  it('rejects a bad web chat request with a JSON error', async () => {
    gw = await startTestGateway({ dir: tmp.dir });
    const response = await post({ user: 'eve' });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: 'invalid_text', type: 'invalid_request_error' } });
    const bad = await fetch(`${gw.url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{nope' });
    expect(bad.status).toBe(400);
  });
});
