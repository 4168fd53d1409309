import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { LlmCallEvent, RefusalEvent } from '../../src/agent/turn-events.ts';
import { internalMessage } from '../../src/core/internal-message.ts';
import type { InternalRoute } from '../../src/core/message.ts';
import { startHarness, type Harness } from '../agent/harness.ts';

// Issue 29: a job's turn is marked in its LLM call events (so its ledger records carry the job id), and it stops
// at the job's token budget.

const search = (n: number) => ({ toolCalls: [{ id: `t${n}`, name: 'memory_search', arguments: '{"query":"x"}' }], usage: { prompt_tokens: 400, completion_tokens: 100 } });

describe('a scheduled run\'s turn', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  async function run(route: Omit<InternalRoute, 'sessionKey'>, sessionKey = 'agent:main:job:standup') {
    const calls: LlmCallEvent[] = [];
    const refusals: RefusalEvent[] = [];
    h!.runtime.events.subscribe({ onLlmCall: (e) => calls.push(e), onRefusal: (e) => refusals.push(e) });
    const message = internalMessage({ ...route, sessionKey }, 'Post the standup notes.', h!.clock.now());
    const result = await h!.runtime.runTurn({ message, sessionKey, correlationId: randomUUID(), signal: new AbortController().signal });
    return { calls, refusals, result, text: result.replies.map((r) => r.text).join('\n') };
  }

  it('every LLM call of a job\'s turn carries run "job" and the job id; a heartbeat\'s carries run "heartbeat"', async () => {
    let n = 0;
    h = await startHarness({ tools: [], reply: () => (++n === 1 ? search(n) : { content: 'done', usage: { prompt_tokens: 50, completion_tokens: 5 } }) });
    const job = await run({ kind: 'job', jobId: 'standup' });
    expect(job.text).toBe('done');
    expect(job.calls.map((c) => [c.run, c.jobId])).toEqual([['job', 'standup'], ['job', 'standup']]);
    const heartbeat = await run({ kind: 'heartbeat' }, 'agent:main:main');
    expect(heartbeat.calls.map((c) => [c.run, c.jobId])).toEqual([['heartbeat', undefined]]);
  });

  it('stops at the job\'s token budget: the call that would pass it is not made, the answer says so, the session is budget-limited', async () => {
    let n = 0;
    h = await startHarness({ tools: [], reply: () => search(++n) });
    const { calls, refusals, text } = await run({ kind: 'job', jobId: 'standup', runTokenBudget: 1200 });
    expect(text).toMatch(/This run of job "standup" stopped at its token budget: it has used 1,000 of 1,200 tokens, and the next request alone needs about [\d,]+ more, so I did not send it\. Raise the job's tokenBudget to let it do more\.$/);
    expect(h.fake.requests).toHaveLength(2);
    // The second call's answer was capped at what the budget left after its predicted prompt.
    expect(h.fake.requests[1]!.body.max_completion_tokens).toBeLessThanOrEqual(1200 - 500 - 400);
    expect(calls.reduce((sum, c) => sum + c.usage.inputTokens + c.usage.outputTokens, 0)).toBe(1000);
    expect(refusals.map((r) => r.reason)).toEqual(['run_budget']);
    expect(h.sessions.peek('agent:main:job:standup')?.entry.runState).toBe('budget-limited');
  });

  it('without a run budget the same turn goes on (the budget is what stopped it)', async () => {
    let n = 0;
    h = await startHarness({ tools: [], reply: () => (++n <= 3 ? search(n) : { content: 'done', usage: { prompt_tokens: 400, completion_tokens: 5 } }) });
    const { text, refusals } = await run({ kind: 'job', jobId: 'standup' });
    expect(text).toBe('done');
    expect(h.fake.requests).toHaveLength(4);
    expect(refusals).toEqual([]);
  });
});
