import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import type { RunningGateway } from '../../src/main.ts';
import { lastUser } from '../fakes/fake-openai.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

describe('session.notifyOnReset', () => {
  const fake = useFakeOpenAI((r) => ({ content: `re: ${lastUser(r)}` }));
  const tmp = useTempDir();
  let gw: RunningGateway | undefined;
  let channel: TestChannel;
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  const start = async (notifyOnReset: boolean, clock: ManualClock) => {
    channel = new TestChannel();
    gw = await startTestGateway({
      dir: tmp.dir, env: { OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-test' }, adapters: [channel], clock,
      config: { channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } }, session: { notifyOnReset, reset: { mode: 'idle', idleMinutes: 30 } } },
    });
    return gw;
  };

  it('false: an automatic reset still starts a new session, without the notice line', async () => {
    const clock = new ManualClock('2026-03-10T10:00:00Z');
    const g = await start(false, clock);
    await (await channel.inject('before')).done;
    const first = (await g.store.get('agent:main:main'))!.sessionId;
    clock.advance(31 * 60_000);
    await (await channel.inject('after a break')).done;
    const entry = (await g.store.get('agent:main:main'))!;
    expect(entry.sessionId).not.toBe(first);
    expect(entry.lastResetReason).toBe('idle');
    const last = channel.sent.at(-1)!.message;
    expect(last.text).toBe('re: after a break');
    expect(last.notice).toBeUndefined();
  });

  it('true (the default): the same reset is announced', async () => {
    const clock = new ManualClock('2026-03-10T10:00:00Z');
    await start(true, clock);
    await (await channel.inject('before')).done;
    clock.advance(31 * 60_000);
    await (await channel.inject('after a break')).done;
    expect(channel.sent.at(-1)!.message.notice).toMatch(/^↻ New session: /);
  });
});
