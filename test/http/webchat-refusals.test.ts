import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import type { RunningGateway } from '../../src/main.ts';
import { startTestGateway, tempDir } from '../helpers/gateway.ts';

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

/** Refusals of the streaming chat routes are JSON errors with their status, before any stream opens (SPEC §7, §14). */
describe('web chat and CLI chat refusals', () => {
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway;

  beforeAll(async () => {
    tmp = tempDir('switchboard-webchat-refusals-');
    // A clock that stands still: one message per minute, so the wait is exactly 60 s.
    gw = await startTestGateway({ dir: tmp.dir, clock: new ManualClock('2026-06-01T10:00:00Z'), config: { limits: { perSender: { perMinute: 1, burst: 1 } } } });
  });
  afterAll(async () => {
    await gw?.stop();
    tmp?.remove();
  });

  it('a streaming web chat request over the rate limit is a 429 with Retry-After in OpenAI\'s error shape', async () => {
    const first = await post(`${gw.url}/webchat/messages`, { user: 'sam', text: 'hello' }, { accept: 'text/event-stream' });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toContain('text/event-stream');
    const events = await first.text();
    expect(events).toContain('event: done');
    expect(events).toContain('(offline) You said');

    const second = await post(`${gw.url}/webchat/messages`, { user: 'sam', text: 'hello again' }, { accept: 'text/event-stream' });
    expect(second.status).toBe(429);
    expect(second.headers.get('content-type')).toContain('application/json');
    expect(second.headers.get('retry-after')).toBe('60');
    expect(await second.json()).toEqual({
      error: { message: 'Too many messages from you; try again in 60 s.', type: 'rate_limit_error', code: 'rate_limit_exceeded' },
    });
  });

  it('switchboard chat through the gateway over the rate limit gets a 429 whose message the terminal prints', async () => {
    const first = await post(`${gw.url}/cli/messages`, { user: 'tess', text: 'hello' }, { accept: 'text/event-stream' });
    expect(first.status).toBe(200);
    expect(await first.text()).toContain('event: done');

    const second = await post(`${gw.url}/cli/messages`, { user: 'tess', text: 'hello again' }, { accept: 'text/event-stream' });
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('60');
    expect(await second.json()).toEqual({
      error: { message: 'Slow down, please: too many messages from you; try again in 60 s.', type: 'rate_limit_error', code: 'rate_limit_exceeded' },
    });
  });

  it('a bad web chat name or text is a 400 before any stream', async () => {
    const badUser = await post(`${gw.url}/webchat/messages`, { user: 'two words', text: 'hi' }, { accept: 'text/event-stream' });
    expect(badUser.status).toBe(400);
    expect(((await badUser.json()) as { error: { code: string } }).error.code).toBe('invalid_user');
    const noText = await post(`${gw.url}/webchat/messages`, { user: 'ann', text: '  ' }, { accept: 'text/event-stream' });
    expect(noText.status).toBe(400);
    expect(((await noText.json()) as { error: { code: string } }).error.code).toBe('invalid_text');
  });
});
