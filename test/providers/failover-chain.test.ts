import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { ConfigError, ProviderError, type ProviderErrorCode } from '../../src/core/errors.ts';
import { CooldownBook } from '../../src/providers/cooldowns.ts';
import { failedAttemptsOf, FailoverProvider, isFailoverError, type FailoverEvent, type FailoverTarget } from '../../src/providers/failover.ts';
import type { CallOptions, Provider, ProviderRequest, ProviderResponse } from '../../src/providers/types.ts';

// The chain's own logic on stub providers; the OpenAI client's part is in failover.test.ts.

type Step = ProviderErrorCode | Error | { status: number } | 'ok' | { text: string; then: ProviderErrorCode };

/** A stub key: answers each call with its next step (then 'ok'); records the calls. */
class StubKey implements Provider {
  readonly kind = 'openai' as const;
  readonly contextWindow = 1000;
  readonly maxTokens = 50;
  readonly calls: { model: string; options: CallOptions }[] = [];
  constructor(readonly id: string, readonly model: string, readonly name: string, private readonly steps: Step[] = []) {}
  async complete(request: ProviderRequest, options: CallOptions = {}): Promise<ProviderResponse> {
    this.calls.push({ model: request.model, options });
    const step = this.steps.shift() ?? 'ok';
    if (step === 'ok') return { content: `${this.name}:${request.model}`, toolCalls: [], model: request.model, retries: 0 };
    if (step instanceof Error) throw step;
    if (typeof step === 'string') throw new ProviderError(step, `${step} from ${this.name}`);
    if ('status' in step) throw new ProviderError('PROVIDER_FAILED', `HTTP ${step.status}`, { status: step.status });
    options.onDelta?.(step.text);
    throw new ProviderError(step.then, 'broke off');
  }
}

const setup = (targets: FailoverTarget[], extra: { onFailover?: (e: FailoverEvent) => void; userChosen?: boolean } = {}) => {
  const clock = new ManualClock();
  const cooldowns = new CooldownBook({ clock });
  const events: FailoverEvent[] = [];
  const provider = new FailoverProvider({ targets, cooldowns, clock, onFailover: extra.onFailover ?? ((e) => events.push(e)), userChosen: extra.userChosen });
  const call = (options: CallOptions = {}) => provider.complete({ model: 'asked', messages: [], correlationId: 'c' }, options);
  return { clock, cooldowns, events, provider, call };
};

describe('FailoverProvider chain logic', () => {
  it('knows the failover errors', () => {
    for (const code of ['PROVIDER_RATE_LIMITED', 'PROVIDER_OVERLOADED', 'PROVIDER_TIMEOUT', 'PROVIDER_UNAVAILABLE', 'PROVIDER_AUTH'] as const) {
      expect(isFailoverError(new ProviderError(code, 'x'))).toBe(true);
    }
    expect(isFailoverError(new ProviderError('PROVIDER_FAILED', 'x', { status: 500 }))).toBe(true);
    expect(isFailoverError(new ProviderError('PROVIDER_FAILED', 'x', { status: 503 }))).toBe(true);
    expect(isFailoverError(new ProviderError('PROVIDER_FAILED', 'x', { status: 499 }))).toBe(false);
    expect(isFailoverError(new ProviderError('PROVIDER_FAILED', 'x'))).toBe(false);
    expect(isFailoverError(new ProviderError('CONTEXT_OVERFLOW', 'x', { status: 400 }))).toBe(false);
    expect(isFailoverError(new ProviderError('PROVIDER_ABORTED', 'x'))).toBe(false);
    expect(isFailoverError(Object.assign(new Error('x'), { code: 'PROVIDER_RATE_LIMITED' }))).toBe(false);
  });

  it('takes its id, kind, model and limits from the first target, and refuses an empty chain', () => {
    const { provider } = setup([
      { providerId: 'a', model: 'a-1', credentials: [new StubKey('a', 'a-default', 'a0')] },
      { providerId: 'b', model: 'b-1', credentials: [new StubKey('b', 'b-default', 'b0')] },
    ], { userChosen: true });
    expect(provider).toMatchObject({ id: 'a', kind: 'openai', model: 'a-1', contextWindow: 1000, maxTokens: 50, userChosen: true });
    expect(provider.listModels).toBeUndefined();
    expect(provider.transcribe).toBeUndefined();
    const clock = new ManualClock();
    expect(() => new FailoverProvider({ targets: [], cooldowns: new CooldownBook({ clock }), clock })).toThrow(ConfigError);
    expect(() => new FailoverProvider({ targets: [{ providerId: 'a', model: 'm', credentials: [] }], cooldowns: new CooldownBook({ clock }), clock })).toThrow(ConfigError);
  });

  it('delegates listModels and transcribe to the first target\'s first key', async () => {
    const first = Object.assign(new StubKey('a', 'm', 'a0'), {
      listModels: async () => ['x', 'y'],
      transcribe: async (audio: { name: string }, o: { model: string }) => `${audio.name} by ${o.model}`,
    });
    const { provider } = setup([{ providerId: 'a', model: 'm', credentials: [first, new StubKey('a', 'm', 'a1')] }]);
    expect(await provider.listModels?.()).toEqual(['x', 'y']);
    expect(await provider.transcribe?.({ data: Buffer.alloc(1), name: 'v.ogg', mime: 'audio/ogg' }, { model: 'whisper' })).toBe('v.ogg by whisper');
  });

  it('sends each target its own model and the caller\'s other options', async () => {
    const a0 = new StubKey('a', 'm', 'a0', ['PROVIDER_RATE_LIMITED']);
    const b0 = new StubKey('b', 'm', 'b0');
    const { call } = setup([{ providerId: 'a', model: 'a-1', credentials: [a0] }, { providerId: 'b', model: 'b-1', credentials: [b0] }]);
    const signal = new AbortController().signal;
    expect(await call({ signal, maxRetries: 3 })).toMatchObject({ content: 'b0:b-1', providerId: 'b' });
    expect(a0.calls).toEqual([{ model: 'a-1', options: { signal, maxRetries: 0 } }]);
    expect(b0.calls).toEqual([{ model: 'b-1', options: { signal, maxRetries: 3 } }]);
  });

  it('rethrows other errors (not ProviderErrors) at once', async () => {
    const boom = new TypeError('bug');
    const b0 = new StubKey('b', 'm', 'b0');
    const { call, cooldowns } = setup([{ providerId: 'a', model: 'a-1', credentials: [new StubKey('a', 'm', 'a0', [boom])] }, { providerId: 'b', model: 'b-1', credentials: [b0] }]);
    const error = await call().catch((e: unknown) => e);
    expect(error).toBe(boom);
    expect(failedAttemptsOf(error)).toMatchObject([{ providerId: 'a', code: 'PROVIDER_FAILED', message: 'bug' }]);
    expect(b0.calls).toEqual([]);
    expect(cooldowns.snapshot()).toEqual([]);
  });

  it('does not fail over a failover error once the caller aborted', async () => {
    const controller = new AbortController();
    const a0 = new StubKey('a', 'm', 'a0');
    a0.complete = async () => {
      controller.abort();
      throw new ProviderError('PROVIDER_TIMEOUT', 'timed out');
    };
    const b0 = new StubKey('b', 'm', 'b0');
    const { call, events, cooldowns } = setup([{ providerId: 'a', model: 'a-1', credentials: [a0] }, { providerId: 'b', model: 'b-1', credentials: [b0] }]);
    await expect(call({ signal: controller.signal })).rejects.toMatchObject({ code: 'PROVIDER_TIMEOUT' });
    expect(b0.calls).toEqual([]);
    expect(events).toEqual([]);
    expect(cooldowns.snapshot()).toEqual([]);
  });

  it('does not fail a stream over after text was passed on, but does when only empty deltas came', async () => {
    const deltas: string[] = [];
    const b0 = new StubKey('b', 'm', 'b0');
    const { call } = setup([{ providerId: 'a', model: 'a-1', credentials: [new StubKey('a', 'm', 'a0', [{ text: 'Hel', then: 'PROVIDER_OVERLOADED' }, { text: '', then: 'PROVIDER_OVERLOADED' }])] }, { providerId: 'b', model: 'b-1', credentials: [b0] }]);
    await expect(call({ onDelta: (t) => deltas.push(t) })).rejects.toMatchObject({ code: 'PROVIDER_OVERLOADED' });
    expect(b0.calls).toEqual([]);
    expect(deltas).toEqual(['Hel']);
  });

  it('a key cooled by this call for one model still serves another model of its provider, unless it was refused', async () => {
    for (const [code, expected] of [['PROVIDER_OVERLOADED', 'a0:a-small'], ['PROVIDER_AUTH', 'b0:b-1']] as const) {
      const a0 = new StubKey('a', 'm', 'a0', [code]);
      const { call, cooldowns } = setup([
        { providerId: 'a', model: 'a-large', credentials: [a0] },
        { providerId: 'a', model: 'a-small', credentials: [a0] },
        { providerId: 'b', model: 'b-1', credentials: [new StubKey('b', 'm', 'b0')] },
      ]);
      expect((await call()).content).toBe(expected);
      // Cooled before the next call: skipped for every model of the provider.
      if (code === 'PROVIDER_OVERLOADED') cooldowns.fail('a', 0, code);
      expect((await call()).content).toBe('b0:b-1');
    }
  });

  it('tries each key once per call, then throws the last error with every attempt', async () => {
    const keys = [new StubKey('a', 'm', 'a0', ['PROVIDER_RATE_LIMITED']), new StubKey('a', 'm', 'a1', ['PROVIDER_TIMEOUT'])];
    const b0 = new StubKey('b', 'm', 'b0', [{ status: 503 }]);
    const { call, events } = setup([{ providerId: 'a', model: 'a-1', credentials: keys }, { providerId: 'b', model: 'b-1', credentials: [b0] }]);
    const error = await call().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'PROVIDER_FAILED', providerStatus: 503 });
    expect([...keys, b0].map((k) => k.calls.length)).toEqual([1, 1, 1]);
    expect(failedAttemptsOf(error)).toEqual([
      { providerId: 'a', model: 'a-1', keyIndex: 0, code: 'PROVIDER_RATE_LIMITED', message: 'PROVIDER_RATE_LIMITED from a0', durationMs: 0, retries: 0 },
      { providerId: 'a', model: 'a-1', keyIndex: 1, code: 'PROVIDER_TIMEOUT', message: 'PROVIDER_TIMEOUT from a1', durationMs: 0, retries: 0 },
      { providerId: 'b', model: 'b-1', keyIndex: 0, code: 'PROVIDER_FAILED', message: 'HTTP 503', durationMs: 0, retries: 0 },
    ]);
    expect(events.map((e) => [e.from.keyIndex, e.to?.providerId])).toEqual([[0, 'a'], [1, 'b'], [0, undefined]]);
    expect('to' in events[2]!).toBe(false);
  });

  it('sums the retries of every attempt into the answer (a key that retried despite maxRetries 0)', async () => {
    const a0 = new StubKey('a', 'm', 'a0');
    a0.complete = async () => { throw Object.assign(new ProviderError('PROVIDER_RATE_LIMITED', 'slow down'), { retries: 2 }); };
    const a1 = new StubKey('a', 'm', 'a1');
    a1.complete = async () => ({ content: 'x', toolCalls: [], model: 'a-1', retries: 1 });
    const { call } = setup([{ providerId: 'a', model: 'a-1', credentials: [a0, a1] }]);
    expect(await call()).toMatchObject({ retries: 3, failedAttempts: [{ keyIndex: 0, retries: 2 }] });
  });

  it('ignores an observer that throws', async () => {
    const { call } = setup([{ providerId: 'a', model: 'a-1', credentials: [new StubKey('a', 'm', 'a0', ['PROVIDER_AUTH']), new StubKey('a', 'm', 'a1')] }], {
      onFailover: () => { throw new Error('observer bug'); },
    });
    expect((await call()).content).toBe('a1:a-1');
  });

  it('answers with the model the provider reported, else the target\'s', async () => {
    const a0 = new StubKey('a', 'm', 'a0');
    a0.complete = async () => ({ content: 'x', toolCalls: [], model: '', retries: 0 });
    const { call } = setup([{ providerId: 'a', model: 'a-1', credentials: [a0] }]);
    expect(await call()).toMatchObject({ model: 'a-1', providerId: 'a', failedAttempts: [] });
  });
});
