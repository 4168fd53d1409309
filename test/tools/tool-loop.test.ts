import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { InboundMessage } from '../../src/core/message.ts';
import type { LlmCallEvent, ToolCallEvent } from '../../src/agent/turn-events.ts';
import type { TranscriptMessage } from '../../src/sessions/transcript.ts';
import { defineTool } from '../../src/tools/tool.ts';
import type { FakeReply, RecordedRequest } from '../fakes/fake-openai.ts';
import { defaultReply, kindOf, startHarness, type Harness } from '../agent/harness.ts';
import { manualTimers } from './timers.ts';

const messages = (h: Harness) => h.fileEntries().filter((e): e is TranscriptMessage => e.type === 'message');
const toolNames = (r: RecordedRequest) => ((r.body.tools ?? []) as { function: { name: string } }[]).map((t) => t.function.name);
const lastRole = (r: RecordedRequest) => r.body.messages.at(-1)!.role;

/** Tools for the loop tests: an adder, one that throws, one that never ends. */
function testTools(log: string[]) {
  return [
    defineTool({ name: 'add', group: 'test', description: 'adds two numbers', schema: z.object({ a: z.number(), b: z.number() }),
      run: async ({ a, b }) => { log.push(`add ${a}+${b}`); return { sum: a + b }; } }),
    defineTool({ name: 'explode', group: 'test', description: 'always fails', schema: z.object({}),
      run: async () => { log.push('explode'); throw new Error('the disk is on fire'); } }),
    defineTool({ name: 'flood', group: 'test', description: 'returns a lot', schema: z.object({}), run: async () => `😀${'y'.repeat(4000)}` }),
    defineTool({ name: 'hang', group: 'test', description: 'never returns', schema: z.object({}),
      run: () => { log.push('hang'); return new Promise(() => undefined); } }),
  ];
}

/** Replies with `calls` (one answer each) while the last message is a user message or a tool result, then with `final`. */
function scripted(rounds: { id: string; name: string; arguments: string }[][], final = 'all done'): (r: RecordedRequest) => FakeReply {
  return (r) => {
    if (kindOf(r) !== 'turn') return defaultReply(r);
    const done = r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
    const round = rounds[done];
    return round ? { toolCalls: round, usage: { prompt_tokens: 100 + done, completion_tokens: 7 } } : { content: final, usage: { prompt_tokens: 200, completion_tokens: 3 } };
  };
}

describe('the tool loop', () => {
  let h: Harness | undefined;
  afterEach(async () => { await h?.close(); h = undefined; });

  it('runs two tool calls, writes each call and result before the next LLM call, and answers; usage per LLM call', async () => {
    const log: string[] = [];
    h = await startHarness({ tools: testTools(log), reply: scripted([[
      { id: 'c1', name: 'add', arguments: '{"a":2,"b":3}' },
      { id: 'c2', name: 'add', arguments: '{"a":10,"b":-4}' },
    ]]) });
    const calls: LlmCallEvent[] = [];
    const tools: ToolCallEvent[] = [];
    h.runtime.events.subscribe({ onLlmCall: (e) => calls.push(e), onToolCall: (e) => tools.push(e) });
    expect(await h.send('what is 2+3 and 10-4?')).toBe('all done');
    expect(log).toEqual(['add 2+3', 'add 10+-4']);
    const m = messages(h);
    expect(m.map((e) => [e.role, e.toolCallId ?? e.toolCalls?.map((c) => c.id).join(',') ?? ''])).toEqual([
      ['user', ''], ['assistant', 'c1,c2'], ['tool', 'c1'], ['tool', 'c2'], ['assistant', ''],
    ]);
    expect(JSON.parse(m[2]!.content)).toEqual({ sum: 5 });
    expect(JSON.parse(m[3]!.content)).toEqual({ sum: 6 });
    // The second request carries both results, in order, right after the call.
    const second = h.turnRequests()[1]!;
    expect(second.body.messages.slice(-3).map((x) => [x.role, x.tool_call_id ?? ''])).toEqual([['assistant', ''], ['tool', 'c1'], ['tool', 'c2']]);
    expect(toolNames(second)).toEqual(['memory_write', 'memory_search', 'add', 'explode', 'flood', 'hang']);
    expect(calls.map((c) => [c.usage.inputTokens, c.usage.outputTokens])).toEqual([[100, 7], [200, 3]]);
    expect(tools.map((t) => [t.name, t.outcome])).toEqual([['add', 'ok'], ['add', 'ok']]);
    expect(h.session().entry.runState).toBe('idle');
    expect(h.session().entry.checkpoint).toMatchObject({ batch: 1, iteration: 2, toolCalls: 2 });
  });

  it('bad arguments, a throwing tool, an unknown tool and a hanging tool (timeout) each become a result; the turn answers', async () => {
    const log: string[] = [];
    const timers = manualTimers();
    h = await startHarness({ tools: testTools(log), toolTimeout: timers.timeout, reply: scripted([[
      { id: 'b1', name: 'add', arguments: '{"a":"two"}' },
      { id: 'b2', name: 'add', arguments: '{not json' },
      { id: 'b3', name: 'explode', arguments: '{}' },
      { id: 'b4', name: 'no_such_tool', arguments: '{}' },
      { id: 'b5', name: 'hang', arguments: '' },
      { id: 'b6', name: 'flood', arguments: '{}' },
    ]], 'recovered'), config: { tools: { timeoutSeconds: 5, maxResultChars: 1000 } } });
    const tools: ToolCallEvent[] = [];
    h.runtime.events.subscribe({ onToolCall: (e) => tools.push(e) });
    const reply = h.send('try everything');
    await timers.waitForPending(1);
    expect(timers.pending()).toEqual([5000]);
    timers.fireAll();
    expect(await reply).toBe('recovered');
    const results = messages(h).filter((e) => e.role === 'tool').map((e) => e.content);
    expect(results[0]).toMatch(/^Error: invalid arguments for add: a: .*; b: .*Fix the arguments/);
    expect(results[1]).toMatch(/^Error: the arguments of add are not valid JSON/);
    expect(results[2]).toBe('Error: the tool "explode" failed: the disk is on fire');
    expect(results[3]).toMatch(/^Error: there is no tool named "no_such_tool"\. Available tools: memory_write, memory_search, add, explode, flood, hang\.$/);
    expect(results[4]).toBe('Error: the tool "hang" did not finish within 5 s and was cancelled.');
    // A result over tools.maxResultChars is cut with a note, and the cut is counted.
    expect(results[5]).toBe(`😀${'y'.repeat(998)}\n[… result cut: 3002 more characters not shown]`);
    expect(log).toEqual(['explode', 'hang']);
    expect(tools.map((t) => t.outcome)).toEqual(['invalid_arguments', 'invalid_arguments', 'error', 'unknown_tool', 'timeout', 'ok']);
    expect(tools.map((t) => t.cutChars)).toEqual([undefined, undefined, undefined, undefined, undefined, 3002]);
  });

  it('/stop (the turn signal) aborts a running tool and the loop; the call gets a "stopped" result at once', async () => {
    const log: string[] = [];
    h = await startHarness({ tools: testTools(log), reply: scripted([[{ id: 'h1', name: 'hang', arguments: '{}' }]], 'fine') });
    const controller = new AbortController();
    const message: InboundMessage = {
      id: 'stop-me', channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: 'alice', peerId: 'alice',
      sender: { id: 'alice', name: 'Alice' }, text: 'hang please', attachments: [], mentionsBot: true, receivedAt: h.clock.now(),
    };
    const turn = h.runtime.runTurn({ message, sessionKey: h.key, correlationId: randomUUID(), signal: controller.signal });
    while (!log.includes('hang')) await new Promise((r) => setImmediate(r));
    controller.abort(new Error('stopped'));
    await expect(turn).rejects.toMatchObject({ code: 'TURN_ABORTED' });
    expect(messages(h).map((e) => e.role)).toEqual(['user', 'assistant', 'tool']);
    expect(h.session().entry.runState).toBe('idle');

    h.fake.fallback = (r) => (lastRole(r) === 'user' ? { content: 'back again', usage: null } : defaultReply(r));
    expect(await h.send('are you there?')).toBe('back again');
    const m = messages(h);
    expect(m.map((e) => e.role)).toEqual(['user', 'assistant', 'tool', 'user', 'assistant']);
    expect(m[2]).toMatchObject({ toolCallId: 'h1' });
    expect(m[2]!.content).toBe('Error: stopped: the user stopped this turn (/stop) while hang was running. Check whether it took effect before calling it again.');
    // The request pairs the stopped call with its result, so the provider accepts it.
    const last = h.turnRequests().at(-1)!;
    expect(last.body.messages.filter((x) => x.role !== 'system').map((x) => x.role)).toEqual(['user', 'assistant', 'tool', 'user']);
  });

  it('streams text and tool-call deltas through the openai client and runs the calls', async () => {
    const log: string[] = [];
    h = await startHarness({ tools: testTools(log), reply: scripted([[{ id: 's1', name: 'add', arguments: '{"a":1,"b":1}' }]], 'two, streamed') });
    const deltas: string[] = [];
    const message: InboundMessage = {
      id: 'm-stream', channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: 'alice', peerId: 'alice',
      sender: { id: 'alice' }, text: '1+1?', attachments: [], mentionsBot: true, receivedAt: h.clock.now(),
    };
    const result = await h.runtime.runTurn({ message, sessionKey: h.key, correlationId: randomUUID(), signal: new AbortController().signal, onDelta: (d) => deltas.push(d) });
    expect(result.replies[0]!.text).toBe('two, streamed');
    expect(h.fake.requests.every((r) => r.body.stream === true)).toBe(true);
    expect(log).toEqual(['add 1+1']);
    expect(deltas.join('')).toBe('two, streamed');
    expect(messages(h)[1]!.toolCalls).toEqual([{ id: 's1', name: 'add', arguments: '{"a":1,"b":1}' }]);
  });

  it('text the model streams along with its tool calls is part of the reply: what streamed is what the reply says', async () => {
    const log: string[] = [];
    h = await startHarness({ tools: testTools(log), reply: (r) => {
      const done = r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
      if (done === 0) return { content: 'Let me add that up.', toolCalls: [{ id: 'p1', name: 'add', arguments: '{"a":2,"b":3}' }] };
      if (done === 1) return { content: 'Checking once more.', toolCalls: [{ id: 'p2', name: 'add', arguments: '{"a":3,"b":2}' }] };
      return { content: 'It is 5.' };
    } });
    const deltas: string[] = [];
    const message: InboundMessage = {
      id: 'm-said', channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: 'alice', peerId: 'alice',
      sender: { id: 'alice' }, text: '2+3?', attachments: [], mentionsBot: true, receivedAt: h.clock.now(),
    };
    const result = await h.runtime.runTurn({ message, sessionKey: h.key, correlationId: randomUUID(), signal: new AbortController().signal, onDelta: (d) => deltas.push(d) });
    expect(result.replies[0]!.text).toBe('Let me add that up.\n\nChecking once more.\n\nIt is 5.');
    expect(deltas.join('')).toBe(result.replies[0]!.text);
    // A platform chat (nothing streamed) gets the final answer, as before.
    expect(await h.send('again?')).toBe('It is 5.');
  });

  it('tool-call arguments streamed in pieces (several calls of one answer) are put together and run', async () => {
    const log: string[] = [];
    h = await startHarness({ tools: testTools(log), reply: (r) => {
      const done = r.body.messages.filter((m) => m.role === 'assistant' && m.tool_calls?.length).length;
      return done === 0
        ? { toolCalls: [{ id: 'q1', name: 'add', arguments: '{"a":12,"b":30}' }, { id: 'q2', name: 'add', arguments: '{"a":100,"b":-1}' }], splitArguments: 3 }
        : { content: 'sums done' };
    } });
    const message: InboundMessage = {
      id: 'm-split', channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: 'alice', peerId: 'alice',
      sender: { id: 'alice' }, text: 'add', attachments: [], mentionsBot: true, receivedAt: h.clock.now(),
    };
    const result = await h.runtime.runTurn({ message, sessionKey: h.key, correlationId: randomUUID(), signal: new AbortController().signal, onDelta: () => undefined });
    expect(result.replies[0]!.text).toBe('sums done');
    expect(h.fake.requests[0]!.body.stream).toBe(true);
    expect(log).toEqual(['add 12+30', 'add 100+-1']);
    expect(messages(h)[1]!.toolCalls).toEqual([{ id: 'q1', name: 'add', arguments: '{"a":12,"b":30}' }, { id: 'q2', name: 'add', arguments: '{"a":100,"b":-1}' }]);
    expect(messages(h).filter((m) => m.role === 'tool').map((m) => m.content)).toEqual(['{"sum":42}', '{"sum":99}']);
  });

  it('stops a batch at maxIterationsPerBatch, says how to go on, and "continue" resumes from the transcript', async () => {
    const log: string[] = [];
    const round = (i: number) => [{ id: `r${i}`, name: 'add', arguments: `{"a":${i},"b":0}` }];
    h = await startHarness({ tools: testTools(log), config: { agents: { defaults: { maxIterationsPerBatch: 3 } } }, reply: scripted([0, 1, 2, 3, 4].map(round), 'finished') });
    expect(await h.send('count')).toBe('I stopped after 3 tool steps without a final answer. Say "continue" to let me go on.');
    expect(h.turnRequests()).toHaveLength(3);
    expect(h.session().entry.runState).toBe('continuing');
    expect(await h.send('continue')).toBe('finished');
    expect(log).toEqual(['add 0+0', 'add 1+0', 'add 2+0', 'add 3+0', 'add 4+0']);
    expect(h.session().entry.runState).toBe('idle');
  });

  it('preset none sends no tools field; /tools minimal sends the memory tools; /context counts them as "tools"', async () => {
    h = await startHarness({ config: { agents: { defaults: { tools: { preset: 'none' } } } } });
    await h.send('hi');
    expect('tools' in h.fake.requests[0]!.body).toBe(false);
    const none = await h.send('/context');
    expect(none).toMatch(/· tools (\d+) ·/);
    const noneTools = Number(/· tools (\d+) ·/.exec(none)![1]);
    expect(await h.send('/tools minimal')).toMatch(/^Tool preset set\. Tools: preset minimal · 2 tools · ~\d+ schema tokens per request\nmemory_write, memory_search/);
    await h.send('again');
    expect(toolNames(h.fake.requests.at(-1)!)).toEqual(['memory_write', 'memory_search']);
    const minimal = Number(/· tools (\d+) ·/.exec(await h.send('/context'))![1]);
    expect(minimal).toBeGreaterThan(noneTools + 50);
    expect(h.session().entry.overrides.toolPreset).toBe('minimal');
    expect(await h.send('/tools everything')).toMatch(/^"everything" is not a tool preset/);
    expect(await h.send('/status')).toContain('• tools: preset minimal · 2 tools');
  });
});
