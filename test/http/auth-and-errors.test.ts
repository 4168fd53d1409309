import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { userText } from '../fakes/fake-openai.ts';
import { startApiHarness, type ApiHarness } from './api-harness.ts';

const ROUTES: [string, string][] = [
  ['POST', '/v1/chat/completions'], ['GET', '/v1/models'], ['GET', '/status'], ['GET', '/usage'], ['GET', '/metrics'],
  ['GET', '/metrics/providers'], ['GET', '/admin/providers'], ['GET', `/admin/sessions/${encodeURIComponent('agent:main:main')}/timeline`], ['GET', '/dashboard/events'],
]; // GET / answers the dashboard's sign-in page instead (test/dashboard).

describe('HTTP auth, limits and errors', () => {
  let h: ApiHarness;
  afterEach(async () => { await h?.close(); });

  it('needs the bearer token on every route but /healthz when gateway.authToken is set', async () => {
    h = await startApiHarness({ config: { providers: { default: { maxRetries: 0 } }, gateway: { port: 0, authToken: 'gw-secret-token' } }, apiKey: 'gw-secret-token' });
    for (const [method, path] of ROUTES) {
      const response = await fetch(`${h.gw.url}${path}`, { method, headers: { 'content-type': 'application/json' }, ...(method === 'POST' ? { body: '{}' } : {}) });
      expect(response.status, `${method} ${path}`).toBe(401);
      expect(await response.json()).toEqual({ error: { message: expect.stringContaining('Bearer'), type: 'authentication_error', code: 'unauthorized' } });
      expect(response.headers.get('x-correlation-id')).toBeTruthy();
    }
    const wrong = await fetch(`${h.gw.url}/status`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    expect((await fetch(`${h.gw.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${h.gw.url}/status`, { headers: { authorization: 'Bearer gw-secret-token' } })).status).toBe(200);

    // The official client sends its apiKey as the bearer token.
    const reply = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'authorized' }] });
    expect(reply.choices[0]?.message.content).toBe('echo: authorized');
    const anonymous = new OpenAI({ apiKey: 'wrong', baseURL: `${h.gw.url}/v1`, maxRetries: 0 });
    await expect(anonymous.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'x' }] })).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('answers 413 for a body over gateway.maxBodyBytes', async () => {
    h = await startApiHarness({ config: { providers: { default: { maxRetries: 0 } }, gateway: { port: 0, maxBodyBytes: 2048 } } });
    const body = JSON.stringify({ model: 'main', messages: [{ role: 'user', content: 'x'.repeat(4096) }] });
    const response = await fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(response.status).toBe(413);
    expect(await response.json()).toMatchObject({ error: { type: 'request_too_large', code: 'body_too_large' } });
    const viaClient = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'y'.repeat(4096) }] }).catch((e: unknown) => e);
    expect((viaClient as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
    expect(h.fake.requests).toHaveLength(0);
  });

  it('answers 400 in OpenAI\'s error shape for bad JSON and bad fields', async () => {
    h = await startApiHarness();
    const post = (body: string, headers: Record<string, string> = {}) => fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    const cases: [string, string, Record<string, string>?][] = [
      ['{not json', 'invalid_json'],
      ['', 'invalid_json'],
      ['{"model":"main"}', 'missing_required_parameter'],
      ['{"model":"main","messages":[]}', 'invalid_value'],
      ['{"model":"main","messages":"hello"}', 'invalid_value'],
      ['{"model":"main","messages":[{"role":"system","content":"only a system prompt"}]}', 'invalid_value'],
      ['{"model":"main","messages":[{"role":"user","content":"   "}]}', 'invalid_value'],
      ['{"model":"main","stream":"yes","messages":[{"role":"user","content":"hi"}]}', 'invalid_value'],
      ['{"model":"main","messages":[{"role":"user","content":"hi"}]}', 'invalid_session_key', { 'X-Session-Key': 'agent:main:telegram:direct:42' }],
    ];
    for (const [body, code, headers] of cases) {
      const response = await post(body, headers);
      expect(response.status, body).toBe(400);
      const json = await response.json() as { error: Record<string, string> };
      expect(Object.keys(json.error).sort(), body).toEqual(['code', 'message', 'type']);
      expect(json.error, body).toMatchObject({ type: 'invalid_request_error', code });
    }
    const missing = await h.client.chat.completions.create({ model: 'main' } as never).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.BadRequestError);
    expect(h.fake.requests).toHaveLength(0);
  });

  it('answers unknown routes with a JSON 404', async () => {
    h = await startApiHarness();
    const response = await fetch(`${h.gw.url}/v1/nothing`);
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { type: 'not_found_error', code: 'not_found' } });
  });

  it('accepts the full session key from the X-Session-Key response header', async () => {
    h = await startApiHarness();
    const first = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'a' }] }, { headers: { 'X-Session-Key': 'gina' } }).withResponse();
    const key = first.response.headers.get('x-session-key')!;
    expect(key).toBe('agent:main:api:direct:gina');
    await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'b' }] }, { headers: { 'X-Session-Key': key } });
    expect(h.fake.requests[1]!.body.messages.filter((m) => m.role === 'user').map((m) => userText(m.content))).toEqual(['a', 'b']);
  });
});
