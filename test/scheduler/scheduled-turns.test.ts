import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/core/clock.ts';
import type { RunningGateway } from '../../src/main.ts';
import { lastUser } from '../fakes/fake-openai.ts';
import { useFakeOpenAI, useTempDir } from '../helpers/fixtures.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { ManualTimers } from '../helpers/manual-timers.ts';
import { TestChannel } from '../helpers/test-channel.ts';
import { until } from '../helpers/wait.ts';

/** The gateway's clock, moved by the test; the scheduler's timers fire as it moves. */
class MovableClock implements Clock {
  readonly timers = new ManualTimers();
  constructor(public at: number) {}
  now(): number { return this.at; }
  advance(ms: number): void {
    this.at += ms;
    this.timers.advance(ms);
  }
}

const START = Date.UTC(2026, 11, 2, 6, 30);

describe('scheduled turns through the gateway (SPEC §17)', () => {
  const tmp = useTempDir('switchboard-scheduled-');
  const openai = useFakeOpenAI();
  let gw: RunningGateway | undefined;
  afterEach(async () => { await gw?.stop(); gw = undefined; });

  async function start(config: Record<string, unknown>) {
    const channel = new TestChannel('telegram');
    const clock = new MovableClock(START);
    gw = await startTestGateway({
      dir: tmp.dir, adapters: [channel], clock, schedulerTimers: clock.timers,
      config: {
        providers: { default: { baseUrl: openai.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
        channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open' } }, ...config,
      },
    });
    return { channel, clock };
  }

  it('a config job runs its prompt in its own session at its due time and the answer reaches its Telegram topic', async () => {
    const { channel, clock } = await start({ jobs: [{ id: 'standup', schedule: '0 7 * * *', timezone: 'UTC', prompt: 'post the standup reminder', deliverTo: { channel: 'telegram', group: '-100555', threadId: '9' } }] });
    clock.advance(29 * 60_000);
    expect(openai.requests).toHaveLength(0);
    clock.advance(60_000);
    await channel.waitForSent(1);
    expect(lastUser(openai.requests[0]!)).toContain('post the standup reminder');
    expect(channel.sent[0]!.target).toMatchObject({ channel: 'telegram', chatId: '-100555', chatType: 'group', threadId: '9' });
    expect(channel.sent[0]!.message.text).toBe('echo: post the standup reminder');
    expect(await gw!.sessions.get('agent:main:job:standup')).toBeDefined();
    await gw!.accounting.flush();
    await channel.inject('/usage', { peerId: '7', chatId: '7' });
    await channel.waitForSent(2);
    expect(channel.texts()[1]).toMatch(/• job standup: [\d,]+ tokens? in 1 call/);
  });

  it('heartbeat: an empty HEARTBEAT.md costs no LLM call; with content it runs, and HEARTBEAT_OK is not delivered', async () => {
    const { channel, clock } = await start({ heartbeat: { every: '30m' } });
    const workspace = gw!.config.agents[0]!.workspace;
    mkdirSync(workspace, { recursive: true });
    writeFileSync(path.join(workspace, 'HEARTBEAT.md'), '# Heartbeat\n\n<!-- add checks here -->\n');
    // A DM first, so the main session has a chat to answer in.
    await channel.inject('hello');
    await channel.waitForSent(1);
    const calls = openai.requests.length;
    for (let i = 0; i < 48; i++) clock.advance(30 * 60_000); // a whole idle day
    await new Promise((r) => setTimeout(r, 50));
    expect(openai.requests.length).toBe(calls);
    console.info(`[heartbeat] an idle day (48 beats every 30 min) with an empty HEARTBEAT.md: ${openai.requests.length - calls} LLM calls, 0 tokens`);

    writeFileSync(path.join(workspace, 'HEARTBEAT.md'), '# Heartbeat\n\n- Tell me if the build is red.\n');
    openai.script.push({ content: 'HEARTBEAT_OK' });
    clock.advance(30 * 60_000);
    await until(() => openai.requests.length > calls, 'the heartbeat turn');
    await new Promise((r) => setTimeout(r, 100));
    expect(channel.texts()).toEqual(['echo: hello']);

    openai.script.push({ content: 'The build is red.' });
    clock.advance(30 * 60_000);
    await channel.waitForSent(2);
    expect(channel.texts()[1]).toBe('The build is red.');
    // /usage shows the heartbeat's tokens on their own line.
    await gw!.accounting.flush();
    await channel.inject('/usage');
    await channel.waitForSent(3);
    expect(channel.texts()[2]).toMatch(/• heartbeat: [\d,]+ tokens? in 2 calls/);
  });

  it('jobs made over /admin/jobs persist across a restart and run now on request; /hooks/agent runs a turn with its own token', async () => {
    const { channel } = await start({ hooks: { token: 'hooks-secret-token' } });
    const created = await fetch(`${gw!.url}/admin/jobs`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'water', schedule: 'every 2h', prompt: 'remind me to drink water', deliverTo: { channel: 'telegram', peer: '42' } }),
    });
    expect(created.status).toBe(201);
    const listed = await (await fetch(`${gw!.url}/admin/jobs`)).json() as { jobs: { job: { id: string }; nextRunAt?: string }[] };
    expect(listed.jobs.map((j) => j.job.id)).toEqual(['water']);
    expect(listed.jobs[0]!.nextRunAt).toBe(new Date(Math.ceil((START + 1) / 7_200_000) * 7_200_000).toISOString());
    expect((await fetch(`${gw!.url}/admin/jobs/water/run`, { method: 'POST' })).status).toBe(202);
    await channel.waitForSent(1);
    expect(channel.texts()[0]).toBe('echo: remind me to drink water');

    await gw!.stop();
    const again = await start({ hooks: { token: 'hooks-secret-token' } });
    const after = await (await fetch(`${gw!.url}/admin/jobs`)).json() as { jobs: { job: { id: string }; state: { runs: number } }[] };
    expect(after.jobs.map((j) => j.job.id)).toEqual(['water']);
    expect(after.jobs[0]!.state.runs).toBe(1);

    const refused = await fetch(`${gw!.url}/hooks/agent`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hi' }) });
    expect(refused.status).toBe(401);
    const hook = await fetch(`${gw!.url}/hooks/agent`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer hooks-secret-token' },
      body: JSON.stringify({ message: 'the deploy finished', deliverTo: { channel: 'telegram', peer: '42' } }),
    });
    expect(hook.status).toBe(200);
    expect(await hook.json()).toMatchObject({ reply: 'echo: the deploy finished' });
    await again.channel.waitForSent(1);
    expect(again.channel.texts()[0]).toBe('echo: the deploy finished');
  });

  it('a reminder the model makes with the schedule tool in a Telegram topic comes back to that topic at its time', async () => {
    const { channel, clock } = await start({ agents: { defaults: { tools: { preset: 'full' } } }, channels: { telegram: { enabled: true, botToken: 'test-token', dmPolicy: 'open', groupPolicy: 'open', requireMention: false } } });
    const at = new Date(START + 10 * 60_000).toISOString();
    let turn = 0;
    openai.fallback = (r) => {
      turn++;
      if (turn === 1) return { toolCalls: [{ id: 'c1', name: 'schedule', arguments: JSON.stringify({ action: 'add', schedule: at, prompt: 'Remind the team: stand-up now.' }) }] };
      if (turn === 2) return { content: 'Reminder set.' };
      return { content: `Reminder: ${lastUser(r).includes('stand-up') ? 'stand-up now' : '?'}` };
    };
    await channel.inject('remind us at the stand-up time', { chatType: 'group', chatId: '-100777', groupId: '-100777', threadId: '12', threadKind: 'topic', peerId: '5', mentionsBot: true });
    await channel.waitForSent(1);
    expect(channel.texts()[0]).toBe('Reminder set.');
    clock.advance(10 * 60_000);
    await channel.waitForSent(2);
    expect(channel.sent[1]!.target).toMatchObject({ chatId: '-100777', threadId: '12' });
    expect(channel.texts()[1]).toBe('Reminder: stand-up now');
  });
});
