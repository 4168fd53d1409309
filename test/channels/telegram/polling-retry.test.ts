import { HttpError } from 'grammy';
import { describe, expect, it } from 'vitest';
import { pollingRetry } from '../../../channels/telegram/polling-retry.ts';
import { ManualTimers } from '../../helpers/manual-timers.ts';

type Answer = { ok: true; result: unknown[] } | { ok: false; error_code: number; description: string };
type Step = Answer | 'network';

const ok: Answer = { ok: true, result: [] };
const answered = (code: number): Answer => ({ ok: false, error_code: code, description: `error ${code}` });

/** Runs one call through the transformer against a scripted Bot API; returns the answer, the calls made and the pauses. */
async function run(steps: Step[], method = 'getUpdates', signal?: AbortSignal) {
  const pauses: number[] = [];
  let calls = 0;
  // Timers that note each pause and end it at once.
  const transformer = pollingRetry({ setTimeout: (fn, ms) => { pauses.push(ms); queueMicrotask(fn); }, clearTimeout: () => undefined });
  const prev = async () => {
    const step = steps[calls++];
    if (step === undefined) throw new Error('called once too often');
    if (step === 'network') throw new HttpError('Network request for getUpdates failed!', new Error('ECONNREFUSED'));
    return step;
  };
  const call = (transformer as unknown as (p: typeof prev, m: string, payload: unknown, s?: AbortSignal) => Promise<Answer>);
  const answer = await call(prev, method, { offset: 1 }, signal).catch((error: unknown) => error);
  return { answer, calls, pauses };
}

describe('pollingRetry: the pauses between getUpdates attempts (those grammy and auto-retry took)', () => {
  it('waits 3 s after each network error, then hands on the answer', async () => {
    expect(await run(['network', 'network', ok])).toEqual({ answer: ok, calls: 3, pauses: [3000, 3000] });
  });

  it('waits 3, 6, 12 and 27 s in a run of 5xx answers, and over again', async () => {
    const steps: Step[] = [...Array.from({ length: 6 }, () => answered(502)), ok];
    expect(await run(steps)).toEqual({ answer: ok, calls: 7, pauses: [3000, 6000, 12_000, 27_000, 3000, 6000] });
  });

  it('starts the 5xx run over after a network error', async () => {
    expect(await run([answered(500), answered(503), 'network', answered(502), ok])).toEqual({ answer: ok, calls: 5, pauses: [3000, 6000, 3000, 3000] });
  });

  it('hands on 4xx answers (401, 404, 409, 429) at once: grammy, the polling watch and auto-retry deal with them', async () => {
    for (const code of [401, 404, 409, 429]) expect(await run([answered(code)])).toEqual({ answer: answered(code), calls: 1, pauses: [] });
  });

  it('does not touch other methods, and rethrows a network error of a stopped bot', async () => {
    const other = await run(['network'], 'sendMessage');
    expect(other.calls).toBe(1);
    expect(other.answer).toBeInstanceOf(HttpError);
    const controller = new AbortController();
    controller.abort();
    const stopped = await run(['network'], 'getUpdates', controller.signal);
    expect(stopped.answer).toBeInstanceOf(HttpError);
    expect(stopped.pauses).toEqual([]);
  });

  it('a stop during a pause ends it at once, and the pause is on the timers it was given', async () => {
    const timers = new ManualTimers();
    const transformer = pollingRetry(timers) as unknown as (p: () => Promise<never>, m: string, payload: unknown, s?: AbortSignal) => Promise<unknown>;
    const controller = new AbortController();
    const failing = () => Promise.reject(new HttpError('Network request for getUpdates failed!', new Error('ECONNRESET')));
    const pending = transformer(failing, 'getUpdates', { offset: 1 }, controller.signal).catch((error: unknown) => error);
    await expect.poll(() => timers.delays()).toEqual([3000]);
    controller.abort();
    expect(await pending).toEqual(new Error('getUpdates was cancelled while waiting to try again'));
    expect(timers.delays()).toEqual([]);
  });
});
