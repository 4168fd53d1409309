import { describe, expect, it } from 'vitest';
import { normalizeUpdate } from '../../channels/telegram/normalize.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { DeliverToConfig } from '../../src/config/scheduler.ts';
import { BadRequestError } from '../../src/core/errors.ts';
import { silentLogger } from '../../src/core/logger.ts';
import { internalMessage } from '../../src/core/internal-message.ts';
import { targetOf, type InboundMessage } from '../../src/core/message.ts';
import type { JobsService } from '../../src/scheduler/jobs.ts';
import { emptyTokens, type SessionEntry } from '../../src/sessions/entry.ts';
import type { SessionManager } from '../../src/sessions/manager.ts';
import { createToolRegistry } from '../../src/tools/index.ts';
import { ToolRegistry, type CallContext } from '../../src/tools/registry.ts';
import { deliverToOf, scheduleTools, type ScheduleJobInput, type ScheduleJobs, type ScheduleJobView } from '../../src/tools/schedule-tools.ts';

// Issue 29: the `schedule` tool makes jobs that answer in the chat they were asked in.

/** The port is the part of the scheduler's service the tool uses: the scheduler can be passed as it is. */
const _portFitsService = (service: JobsService): ScheduleJobs => service;
void _portFitsService;

/** As the scheduler names its schedule errors (an actionable message). */
class ScheduleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScheduleError';
  }
}

/** The jobs service in memory: `every <n>s` under 60 s is refused as the scheduler refuses it. */
class FakeJobs implements ScheduleJobs {
  readonly views = new Map<string, ScheduleJobView>();
  readonly added: { input: ScheduleJobInput; createdBy: string }[] = [];
  private n = 0;
  async list(): Promise<ScheduleJobView[]> { return [...this.views.values()]; }
  async add(input: ScheduleJobInput, createdBy: string): Promise<ScheduleJobView> {
    const seconds = /^every (\d+)s$/.exec(input.schedule)?.[1];
    if (seconds && Number(seconds) < 60) {
      throw new ScheduleError(`"${input.schedule}" would run more often than every 60 s (scheduler.minIntervalSeconds); choose a longer interval.`);
    }
    const id = input.id ?? `job-${++this.n}`;
    if (this.views.has(id)) throw new BadRequestError(`A job "${id}" exists already; remove it first or choose another id.`, 'job_exists');
    this.added.push({ input, createdBy });
    const view: ScheduleJobView = {
      job: { id, schedule: input.schedule, prompt: input.prompt, agentId: input.agentId, source: 'runtime', enabled: true, ...(input.timezone ? { timezone: input.timezone } : {}) },
      state: {}, nextRunAt: Date.UTC(2026, 4, 1, 15, 0),
    };
    this.views.set(id, view);
    return view;
  }
  async remove(id: string): Promise<boolean> { return this.views.delete(id); }
}

function entryOf(over: Partial<SessionEntry> = {}): SessionEntry {
  return {
    key: 'agent:main:telegram:group:-1001234:topic:42', sessionId: 'sid', agentId: 'main', channel: 'telegram', accountId: 'default', chatType: 'group',
    createdAt: 0, updatedAt: 0, sessionStartedAt: 0, state: 'active', runState: 'running', overrides: {}, tokens: emptyTokens(), contextTokens: 0,
    compactionCount: 0, messageCount: 0, ...over,
  };
}

/** A message in topic 42 of a Telegram forum group, as the Telegram channel normalizes it. */
function topicMessage(): InboundMessage {
  const result = normalizeUpdate({
    update_id: 9001,
    message: {
      message_id: 77, date: 1, chat: { id: -1001234, type: 'supergroup', title: 'Team', is_forum: true }, from: { id: 555, is_bot: false, first_name: 'Ana' },
      text: '@bot remind me at 17:00 to call Bo', message_thread_id: 42, is_topic_message: true,
    },
  } as never, { accountId: 'default', bot: { id: 1, username: 'bot' }, now: 0 });
  if (!('message' in result)) throw new Error(`not a message: ${result.ignored}`);
  return result.message;
}

const dm = (over: Partial<InboundMessage> = {}): InboundMessage => ({
  id: 'm1', channel: 'telegram', accountId: 'default', chatType: 'direct', chatId: '555', peerId: '555', sender: { id: '555' }, text: 'hi', attachments: [],
  mentionsBot: true, receivedAt: 0, ...over,
});

function setup(options: { message?: InboundMessage; entry?: SessionEntry; jobs?: FakeJobs | undefined } = {}) {
  const jobs = 'jobs' in options ? options.jobs : new FakeJobs();
  const registry = new ToolRegistry({ timeoutMs: 5000, maxResultChars: 10_000 });
  for (const tool of scheduleTools({ jobs: () => jobs, defaultAgentId: 'main' })) registry.register(tool);
  const enabled = registry.schemasFor({ preset: 'full', allow: [], deny: [] });
  const context: CallContext = {
    entry: options.entry ?? entryOf(), message: options.message ?? topicMessage(), correlationId: 'c', signal: new AbortController().signal,
    logger: silentLogger(), workspace: '/nowhere', timezone: 'Europe/Berlin', now: () => 0, lendSlot: (work) => work(),
  };
  const call = (args: Record<string, unknown>) => registry.execute({ id: 'call-1', name: 'schedule', arguments: JSON.stringify(args) }, enabled, context);
  return { jobs: jobs as FakeJobs, call };
}

describe('schedule add', () => {
  it('a reminder asked in a Telegram forum topic goes back to that group and topic, for this agent, made by this session', async () => {
    const { jobs, call } = setup();
    const outcome = await call({ action: 'add', schedule: '2026-05-01T17:00', prompt: 'Remind Ana to call Bo.' });
    expect(outcome.outcome).toBe('ok');
    expect(jobs.added).toEqual([{
      input: {
        schedule: '2026-05-01T17:00', prompt: 'Remind Ana to call Bo.', agentId: 'main', timezone: 'Europe/Berlin',
        deliverTo: { channel: 'telegram', accountId: 'default', group: '-1001234', threadId: '42' },
      },
      createdBy: 'tool:agent:main:telegram:group:-1001234:topic:42',
    }]);
    expect(JSON.parse(outcome.content)).toMatchObject({ status: 'added', id: 'job-1', schedule: '2026-05-01T17:00', nextRunAt: '2026-05-01T15:00:00.000Z' });
  });

  it('delivers where the channel would answer the message itself: same chat, same topic', () => {
    const message = topicMessage();
    const deliverTo = deliverToOf(message) as DeliverToConfig;
    const reply = targetOf(message);
    expect([deliverTo.group, deliverTo.threadId]).toEqual([reply.chatId, reply.threadId]);
  });

  it('a direct chat is named by its chat id as peer (Discord: the DM channel the bot writes to, not the user)', () => {
    expect(deliverToOf(dm())).toEqual({ channel: 'telegram', accountId: 'default', peer: '555' });
    expect(deliverToOf(dm({ channel: 'discord', accountId: 'work', chatId: 'dm-chan-1', peerId: 'user-9' })))
      .toEqual({ channel: 'discord', accountId: 'work', peer: 'dm-chan-1' });
    expect(deliverToOf(dm({ channel: 'slack', chatType: 'channel', chatId: 'C1', groupId: 'C1', threadId: '1700.1' })))
      .toEqual({ channel: 'slack', accountId: 'default', group: 'C1', threadId: '1700.1' });
  });

  it('takes the id and time zone it is given', async () => {
    const { jobs, call } = setup({ message: dm() });
    expect((await call({ action: 'add', schedule: '0 9 * * 1-5', prompt: 'Standup notes', timezone: 'America/New_York', id: 'standup' })).outcome).toBe('ok');
    expect(jobs.added[0]?.input).toMatchObject({ id: 'standup', timezone: 'America/New_York', deliverTo: { peer: '555' } });
  });

  it.each([
    ['the HTTP API', dm({ channel: 'api', chatId: 'client-1' })],
    ['the command line', dm({ channel: 'cli', chatId: 'local' })],
    ['a spawned sub-agent (internal, no chat)', internalMessage({ kind: 'spawn', sessionKey: 'agent:main:subagent:x' }, 'task', 0)],
  ])('refuses from %s: no chat to post to, said to the model, nothing added', async (_name, message) => {
    const { jobs, call } = setup({ message });
    const outcome = await call({ action: 'add', schedule: 'every 30m', prompt: 'ping' });
    expect(outcome.outcome).toBe('error');
    expect(outcome.content).toMatch(/^Error: this conversation \(channel (api|cli|internal)\) has no chat a job could post to/);
    expect(jobs.added).toEqual([]);
  });

  it('an internal turn that answers in a chat (a sub-agent report) schedules into that chat', async () => {
    const target = targetOf(topicMessage());
    const message = internalMessage({ kind: 'subagent_result', sessionKey: 'agent:main:telegram:group:-1001234:topic:42', deliverTo: target }, 'done', 0);
    const { jobs, call } = setup({ message });
    expect((await call({ action: 'add', schedule: 'every 1h', prompt: 'check' })).outcome).toBe('ok');
    expect(jobs.added[0]?.input.deliverTo).toEqual({ channel: 'telegram', accountId: 'default', group: '-1001234', threadId: '42' });
  });

  it('a schedule the service refuses comes back as the tool\'s error text, as the service wrote it', async () => {
    const { jobs, call } = setup();
    const outcome = await call({ action: 'add', schedule: 'every 10s', prompt: 'spam' });
    expect(outcome).toEqual({ outcome: 'error', content: 'Error: "every 10s" would run more often than every 60 s (scheduler.minIntervalSeconds); choose a longer interval.' });
    expect(jobs.added).toEqual([]);
    await call({ action: 'add', schedule: 'every 1h', prompt: 'a', id: 'dup' });
    expect(await call({ action: 'add', schedule: 'every 1h', prompt: 'b', id: 'dup' }))
      .toEqual({ outcome: 'error', content: 'Error: A job "dup" exists already; remove it first or choose another id.' });
  });

  it('says what is missing: schedule, prompt', async () => {
    const { call } = setup();
    expect((await call({ action: 'add', prompt: 'x' })).content).toMatch(/^Error: action "add" needs schedule/);
    expect((await call({ action: 'add', schedule: 'every 1h' })).content).toMatch(/^Error: action "add" needs prompt/);
  });

  it('without the scheduler the tool says so', async () => {
    const { call } = setup({ jobs: undefined });
    expect(await call({ action: 'list' })).toEqual({ outcome: 'error', content: 'Error: scheduled jobs are not available on this gateway right now.' });
  });
});

describe('schedule list and remove', () => {
  async function withJobs() {
    const s = setup();
    await s.call({ action: 'add', schedule: 'every 1h', prompt: 'mine', id: 'mine' });
    await s.jobs.add({ id: 'other', schedule: 'every 1h', prompt: 'theirs', agentId: 'ops', deliverTo: { channel: 'telegram', accountId: 'default', peer: '1' } }, 'cli');
    s.jobs.views.set('cfg', {
      job: { id: 'cfg', schedule: '0 8 * * *', prompt: 'config job of the default agent', source: 'config', enabled: true },
      state: { lastRunAt: Date.UTC(2026, 0, 1, 8), lastOutcome: 'delivered' }, nextRunAt: Date.UTC(2026, 0, 2, 8),
    });
    return s;
  }

  it('lists this agent\'s jobs only (a config job without agentId is the default agent\'s): id, schedule, next run, last outcome', async () => {
    const { call } = await withJobs();
    const outcome = await call({ action: 'list' });
    expect(JSON.parse(outcome.content)).toEqual({
      jobs: [
        { id: 'mine', schedule: 'every 1h', timezone: 'Europe/Berlin', prompt: 'mine', nextRunAt: '2026-05-01T15:00:00.000Z', source: 'runtime' },
        {
          id: 'cfg', schedule: '0 8 * * *', prompt: 'config job of the default agent', nextRunAt: '2026-01-02T08:00:00.000Z',
          lastRunAt: '2026-01-01T08:00:00.000Z', lastOutcome: 'delivered', source: 'config',
        },
      ],
    });
  });

  it('removes a job of this agent; not another agent\'s, not a config job, not one that is not there', async () => {
    const { jobs, call } = await withJobs();
    expect(await call({ action: 'remove', id: 'other' })).toEqual({ outcome: 'error', content: 'Error: there is no job "other" of this agent (see action "list").' });
    expect(jobs.views.has('other')).toBe(true);
    expect((await call({ action: 'remove', id: 'cfg' })).content).toMatch(/^Error: job "cfg" comes from the config file/);
    expect(jobs.views.has('cfg')).toBe(true);
    expect((await call({ action: 'remove', id: 'nope' })).outcome).toBe('error');
    expect((await call({ action: 'remove' })).content).toMatch(/^Error: action "remove" needs id/);
    expect(await call({ action: 'remove', id: 'mine' })).toEqual({ outcome: 'ok', content: '{"status":"removed","id":"mine"}' });
    expect(jobs.views.has('mine')).toBe(false);
  });

  it('another agent\'s session sees and removes its own jobs only', async () => {
    const s = await withJobs();
    const ops = setup({ jobs: s.jobs, entry: entryOf({ agentId: 'ops', key: 'agent:ops:main' }) });
    expect(JSON.parse((await ops.call({ action: 'list' })).content).jobs.map((j: { id: string }) => j.id)).toEqual(['other']);
    expect((await ops.call({ action: 'remove', id: 'mine' })).outcome).toBe('error');
    expect((await ops.call({ action: 'remove', id: 'other' })).outcome).toBe('ok');
  });
});

describe('registration', () => {
  const config = loadConfig({ cwd: '/nonexistent', env: {}, dotenv: false, overrides: { logLevel: 'silent' } });
  const base = {
    config, sessions: {} as SessionManager, sink: () => { throw new Error('unused'); }, history: async () => [],
    reader: { get: async () => undefined, all: async function* () { /* none */ } },
  };

  it('with the jobs, `schedule` is in group:schedule, in preset full only (or by allow)', () => {
    const registry = createToolRegistry({ ...base, jobs: () => new FakeJobs() });
    expect(registry.get('schedule')?.group).toBe('group:schedule');
    const names = (preset: 'messaging' | 'full' | 'minimal' | 'none') => registry.schemasFor({ preset, allow: [], deny: [] }).map((s) => s.name);
    expect(names('full')).toContain('schedule');
    expect(names('messaging')).not.toContain('schedule');
    expect(names('minimal')).not.toContain('schedule');
    expect(registry.schemasFor({ preset: 'messaging', allow: ['group:schedule'], deny: [] }).map((s) => s.name)).toContain('schedule');
    expect(registry.schemasFor({ preset: 'full', allow: [], deny: ['group:schedule'] }).map((s) => s.name)).not.toContain('schedule');
  });

  it('without them it is not registered', () => {
    expect(createToolRegistry(base).get('schedule')).toBeUndefined();
  });
});
