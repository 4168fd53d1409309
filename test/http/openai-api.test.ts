import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { conversation, lastUser, userText } from '../fakes/fake-openai.ts';
import { startApiHarness, type ApiHarness } from './api-harness.ts';

describe('POST /v1/chat/completions with the official openai client', () => {
  let h: ApiHarness;
  afterEach(async () => { await h?.close(); });

  it('answers without streaming: content, this request\'s usage, correlation id header', async () => {
    h = await startApiHarness({ fallback: (r) => ({ content: `echo: ${lastUser(r)}`, usage: { prompt_tokens: 12, completion_tokens: 3 } }) });
    const { data, response } = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'hello there' }] }).withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.choices[0]?.message).toMatchObject({ role: 'assistant', content: 'echo: hello there' });
    expect(data.choices[0]?.finish_reason).toBe('stop');
    expect(data.model).toBe('gpt-test');
    expect(data.usage).toEqual({ prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 });
    expect(response.headers.get('x-correlation-id')).toBeTruthy();
  });

  it('streams SSE ending in data: [DONE], with the usage in the last chunk when asked', async () => {
    h = await startApiHarness({ fallback: (r) => ({ content: `streamed reply to ${lastUser(r)}`, usage: { prompt_tokens: 20, completion_tokens: 6 } }) });
    const stream = await h.client.chat.completions.create({ model: 'main', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'go' }] });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('streamed reply to go');
    expect(chunks.at(-1)).toMatchObject({ object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 20, completion_tokens: 6, total_tokens: 26 } });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe('stop');
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(h.fake.requests[0]?.body.stream).toBe(true); // the upstream call streams too

    // Raw wire format, and no usage chunk unless asked.
    const raw = await fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'main', stream: true, messages: [{ role: 'user', content: 'raw' }] }) });
    expect(raw.headers.get('content-type')).toContain('text/event-stream');
    const events = (await raw.text()).trim().split('\n\n');
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(events.slice(0, -1).map((e) => JSON.parse(e.slice(6))).some((c) => c.usage)).toBe(false);
  });

  it('binds X-Session-Key (or user) to a stable session whose usage per call is not cumulative', async () => {
    h = await startApiHarness({ fallback: (r) => ({ content: `re: ${lastUser(r)}`, usage: { prompt_tokens: 10, completion_tokens: 5 } }) });
    const headers = { 'X-Session-Key': 'Alice' };
    const first = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'one' }] }, { headers }).withResponse();
    const second = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'system', content: 'ignored' }, { role: 'user', content: 'earlier, ignored' }, { role: 'user', content: 'two' }] }, { headers }).withResponse();
    expect(first.data.usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
    expect(second.data.usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
    expect(second.response.headers.get('x-session-key')).toBe('agent:main:api:direct:alice');
    // The session keeps its own history: the second upstream call carries the first exchange, not the request's earlier messages.
    const upstream = conversation(h.fake.requests[1]!);
    expect(upstream).toEqual(['one', 're: one', 'two']);
    const entry = await (await fetch(`${h.gw.url}/admin/sessions/${encodeURIComponent('agent:main:api:direct:alice')}`)).json();
    expect(entry).toMatchObject({ channel: 'api', tokens: { input: 20, output: 10, cacheRead: 0, cacheWrite: 0 }, totalTokens: 30 });

    // `user` names the same session; the stream's usage chunk is this call's only.
    const stream = await h.client.chat.completions.create({ model: 'main', user: 'alice', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'three' }] });
    let usage;
    for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
    expect(usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
    expect(h.fake.requests[2]!.body.messages.filter((m) => m.role === 'user').map((m) => userText(m.content))).toEqual(['one', 'two', 'three']);
  });

  it('treats a call without X-Session-Key or user as a one-off session that is not persisted', async () => {
    h = await startApiHarness();
    await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'first one-off' }] });
    await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'second one-off' }] });
    expect(h.fake.requests[1]!.body.messages.filter((m) => m.role === 'user').map((m) => userText(m.content))).toEqual(['second one-off']);
    const { sessions } = await (await fetch(`${h.gw.url}/admin/sessions`)).json() as { sessions: unknown[] };
    expect(sessions).toEqual([]);
    expect(await h.gw.store.count()).toBe(0);
    const [a, b] = h.ledger();
    expect(a?.channel).toBe('api');
    expect(a?.sessionKey).toMatch(/^agent:main:api:direct:oneoff-/);
    expect(a?.sessionKey).not.toBe(b?.sessionKey);
  });

  it('carries X-Request-Id into the ledger, the upstream correlation header and X-Correlation-Id', async () => {
    h = await startApiHarness();
    const { response } = await h.client.chat.completions.create({ model: 'main', user: 'bob', messages: [{ role: 'user', content: 'trace me' }] }, { headers: { 'X-Request-Id': 'req-abc-123' } }).withResponse();
    expect(response.headers.get('x-correlation-id')).toBe('req-abc-123');
    expect(h.fake.requests[0]?.headers['x-switchboard-correlation-id']).toBe('req-abc-123');
    expect(h.ledger().map((r) => r.correlationId)).toEqual(['req-abc-123']);

    const streamed = await h.client.chat.completions.create({ model: 'main', user: 'bob', stream: true, messages: [{ role: 'user', content: 'again' }] }, { headers: { 'X-Trace-Id': 'trace-9' } }).withResponse();
    for await (const _ of streamed.data) { /* drain */ }
    expect(streamed.response.headers.get('x-correlation-id')).toBe('trace-9');
    expect(h.fake.requests[1]?.headers['x-switchboard-correlation-id']).toBe('trace-9');
    expect(h.ledger().map((r) => r.correlationId)).toEqual(['req-abc-123', 'trace-9']);
  });

  it('sends the correlation id in the header a provider names with correlationHeader', async () => {
    h = await startApiHarness({ config: { providers: { default: { maxRetries: 0, correlationHeader: 'X-Upstream-Trace' } } } });
    await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'X-Request-Id': 'renamed-1' } });
    expect(h.fake.requests[0]?.headers['x-upstream-trace']).toBe('renamed-1');
    expect(h.fake.requests[0]?.headers['x-switchboard-correlation-id']).toBeUndefined();
  });

  it('estimates with the tokenizer when the provider reports no usage, and marks it', async () => {
    h = await startApiHarness({ fallback: () => ({ content: 'an answer without any usage figures', usage: null }) });
    const { data, response } = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'count yourself' }] }).withResponse();
    const [entry] = h.ledger();
    expect(entry?.isEstimated).toBe(true);
    // o200k_base (gpt-test is not a GPT-4/3.5 model): "an", " answer", " without", " any", " usage", " figures".
    expect(entry?.outputTokens).toBe(6);
    // The input estimate is the tokenizer's count of the request, component by component (calibration may scale it).
    const components = Object.values(entry!.estimatedInputTokensByComponent).reduce((a, b) => a + b, 0);
    expect(entry!.inputTokens / components).toBeGreaterThan(0.5);
    expect(entry!.inputTokens / components).toBeLessThan(2);
    expect(entry?.estimatedInputTokensByComponent.userInput).toBeGreaterThanOrEqual(2); // "count", " yourself"
    expect(data.usage).toMatchObject({ prompt_tokens: entry?.inputTokens, completion_tokens: entry?.outputTokens });
    expect(response.headers.get('x-usage-estimated')).toBe('true');

    // Streaming without a usage chunk is estimated the same way.
    const stream = await h.client.chat.completions.create({ model: 'main', stream: true, messages: [{ role: 'user', content: 'again' }] });
    for await (const _ of stream) { /* drain */ }
    expect(h.ledger()[1]?.isEstimated).toBe(true);
    expect(h.ledger()[1]?.outputTokens).toBe(6);
  });

  it('reports cached prompt tokens as OpenAI does, and as cache reads in the ledger', async () => {
    h = await startApiHarness({ fallback: () => ({ content: 'ok', usage: { prompt_tokens: 100, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 64 } } }) });
    const data = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'cache?' }] });
    expect(data.usage).toEqual({ prompt_tokens: 100, completion_tokens: 4, total_tokens: 104, prompt_tokens_details: { cached_tokens: 64 } });
    expect(h.ledger()[0]).toMatchObject({ inputTokens: 36, cacheReadTokens: 64, outputTokens: 4, cacheWriteTokens: 0 });
  });

  it('lets model name an agent (or its model), refuses an unknown one, and reads text content parts', async () => {
    h = await startApiHarness({ config: { providers: { default: { maxRetries: 0 } }, agents: { list: [{ id: 'main' }, { id: 'coder', model: 'gpt-coder' }] } } });
    const { response } = await h.client.chat.completions.create({ model: 'coder', user: 'dev', messages: [{ role: 'user', content: [{ type: 'text', text: 'part one' }, { type: 'text', text: 'part two' }] }] }).withResponse();
    expect(response.headers.get('x-session-key')).toBe('agent:coder:api:direct:dev');
    expect(h.fake.requests[0]?.body.model).toBe('gpt-coder');
    expect(lastUser(h.fake.requests[0]!)).toBe('part one\npart two');
    await h.client.chat.completions.create({ model: 'gpt-coder', user: 'dev2', messages: [{ role: 'user', content: 'by model' }] });
    expect(h.ledger()[1]).toMatchObject({ agentId: 'coder', sessionKey: 'agent:coder:api:direct:dev2' });
    // SPEC §12: a model that names neither an agent nor an agent's model is a 404 the client understands.
    const unknown = await h.client.chat.completions.create({ model: 'something-else', user: 'dev3', messages: [{ role: 'user', content: 'default' }] }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect((unknown as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_found');
    expect(h.ledger()).toHaveLength(2);
  });

  it('answers provider failures with OpenAI-shaped errors the client understands', async () => {
    h = await startApiHarness();
    h.fake.script.push({ status: 429, error: { message: 'slow down' } });
    const limited = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect((limited as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });

    h.fake.script.push({ status: 500, error: { message: 'boom' } });
    const failed = await h.client.chat.completions.create({ model: 'main', stream: true, messages: [{ role: 'user', content: 'y' }] }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(OpenAI.APIError);
    expect((failed as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    expect((failed as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ type: 'upstream_error', code: 'provider_failed' });

    const ok = await h.client.chat.completions.create({ model: 'main', messages: [{ role: 'user', content: 'z' }] });
    expect(ok.choices[0]?.message.content).toBe('echo: z');
  });

  it('runs chat commands through the API and lists agents and models', async () => {
    h = await startApiHarness();
    const help = await h.client.chat.completions.create({ model: 'main', user: 'cmd', messages: [{ role: 'user', content: '/help' }] });
    expect(help.choices[0]?.message.content).toContain('/usage');
    expect(help.usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });
    expect(h.fake.requests).toHaveLength(0);

    const models = await h.client.models.list();
    const ids = [];
    for await (const m of models) ids.push(m.id);
    expect(ids).toEqual(['main', 'gpt-test']);
  });
});
