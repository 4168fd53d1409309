import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { silentLogger } from '../../src/core/logger.ts';
import { startTypingLoop, typingRefreshMs } from '../../src/gateway/typing-loop.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { defineTool } from '../../src/tools/tool.ts';
import { startFakeOpenAI, lastUser, type FakeOpenAI, type FakeReply } from '../fakes/fake-openai.ts';
import { tempDir, testConfig } from '../helpers/gateway.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { until } from '../helpers/wait.ts';

/** A test channel whose typing lasts as long as Telegram's. */
class TelegramLikeChannel extends TestChannel {
  readonly typingLapseMs = 5000;
}

describe('typing loop', () => {
  it('refreshes a little before the indicator lapses: Telegram 5 s → 4 s, Discord 10 s → 8 s', () => {
    expect(typingRefreshMs(5000)).toBe(4000);
    expect(typingRefreshMs(10_000)).toBe(8000);
    expect(typingRefreshMs(1000)).toBe(500);
  });

  it('shows at once, again every interval, never after stop, and goes on after a failed refresh', async () => {
    const timers = new ManualTimers();
    let shown = 0;
    const errors: unknown[] = [];
    const loop = startTypingLoop(async () => { shown++; if (shown === 2) throw new Error('429'); }, 4000, (err) => errors.push(err), timers);
    expect(shown).toBe(1);
    timers.advance(3999);
    expect(shown).toBe(1);
    timers.advance(1);
    expect(shown).toBe(2);
    timers.advance(4000);
    expect(shown).toBe(3);
    await new Promise((r) => setImmediate(r));
    expect(errors).toHaveLength(1);
    await loop.stop();
    timers.advance(60_000);
    expect(shown).toBe(3);
    expect(timers.delays()).toEqual([]);
  });

  it('stop waits for a refresh still in flight, so the reply is not followed by it', async () => {
    const timers = new ManualTimers();
    let finish!: () => void;
    const loop = startTypingLoop(() => new Promise<void>((resolve) => { finish = resolve; }), 4000, () => undefined, timers);
    let stopped = false;
    const stopping = loop.stop().then(() => { stopped = true; });
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    finish();
    await stopping;
    expect(stopped).toBe(true);
  });
});

describe('typing through a turn', () => {
  let fake: FakeOpenAI;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway | undefined;
  let releaseTool: (() => void) | undefined;
  let releaseModel: ((reply: FakeReply) => void) | undefined;

  beforeEach(async () => {
    fake = await startFakeOpenAI((r) => ({ content: `re: ${lastUser(r)}` }));
    tmp = tempDir();
  });
  afterEach(async () => {
    releaseTool?.();
    releaseModel?.({ content: 'late' });
    await gw?.stop();
    gw = undefined;
    await fake.close();
    tmp.remove();
  });

  it('keeps typing every 4 s while the model works and while a tool runs, and stops when the reply goes out', async () => {
    const timers = new ManualTimers();
    const channel = new TelegramLikeChannel();
    const config = testConfig(tmp.dir, {
      providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      agents: { defaults: { tools: { preset: 'full' } } },
      channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } },
    });
    gw = await startGateway({ config, logger: silentLogger(), adapters: [channel], typingTimers: timers });
    gw.runtime.tools.register(defineTool({
      name: 'slow_lookup', group: 'group:memory', description: 'waits', schema: z.object({}),
      run: () => new Promise((resolve) => { releaseTool = () => resolve('found'); }),
    }));
    fake.script.push({ toolCalls: [{ id: 'c1', name: 'slow_lookup', arguments: '{}' }], usage: null });
    fake.fallback = () => new Promise<FakeReply>((resolve) => { releaseModel = resolve; });

    const submission = await channel.inject('look it up');
    expect(channel.typings).toHaveLength(1);
    // The tool runs: refreshed every 4 s, before Telegram's 5 s lapse.
    await until(() => releaseTool, 'the tool call');
    expect(timers.delays()).toEqual([4000]);
    for (let i = 0; i < 3; i++) timers.advance(4000);
    expect(channel.typings).toHaveLength(4);
    releaseTool!();
    // The model works on the tool's answer: still refreshed.
    await until(() => releaseModel, 'the second model call');
    timers.advance(4000);
    expect(channel.typings).toHaveLength(5);
    releaseModel!({ content: 'the answer' });
    await submission.done;
    expect(channel.texts()).toEqual(['the answer']);
    // Nothing after the reply: the loop's timer is gone.
    timers.advance(60_000);
    expect(channel.typings).toHaveLength(5);
  });

  it('stops when the turn fails', async () => {
    const timers = new ManualTimers();
    const channel = new TelegramLikeChannel();
    const config = testConfig(tmp.dir, {
      providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } },
    });
    gw = await startGateway({ config, logger: silentLogger(), adapters: [channel], typingTimers: timers });
    fake.script.push({ status: 500, error: { message: 'boom' } });
    await (await channel.inject('hello')).done;
    expect(channel.texts()[0]).toMatch(/^Sorry/);
    const shown = channel.typings.length;
    timers.advance(60_000);
    expect(channel.typings).toHaveLength(shown);
  });
});
