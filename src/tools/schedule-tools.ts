import { z } from 'zod';
import { jobId, type DeliverToConfig } from '../config/scheduler.ts';
import { SwitchboardError } from '../core/errors.ts';
import type { InboundMessage } from '../core/message.ts';
import { ToolErrorResult } from './registry.ts';
import { replyTargetOf } from './session-tools.ts';
import { defineTool, type Tool, type ToolContext } from './tool.ts';

/**
 * A job as the `schedule` tool reads it: the fields it shows of the scheduler's `JobView` (src/scheduler/jobs.ts),
 * which is structurally one of these.
 */
export interface ScheduleJobView {
  job: {
    id: string;
    schedule: string;
    timezone?: string;
    prompt: string;
    /** Absent: the first configured agent. */
    agentId?: string;
    source: 'config' | 'runtime';
    enabled?: boolean;
  };
  state: { lastRunAt?: number; lastOutcome?: string; lastError?: string; paused?: boolean };
  /** Epoch ms of the next due time; absent for a one-off that ran, or a paused or disabled job. */
  nextRunAt?: number;
}

/** What the tool makes a job from (a subset of the scheduler's `JobInput`). */
export interface ScheduleJobInput {
  id?: string;
  schedule: string;
  timezone?: string;
  prompt: string;
  agentId: string;
  deliverTo: DeliverToConfig;
}

/**
 * The jobs port of the `schedule` tool: the part of the scheduler's `JobsService` it uses (src/scheduler is a
 * layer above the tools, so the tool defines what it needs and the wiring passes the scheduler in). Errors the
 * service throws for a bad request (a `ScheduleError`, a 4xx `SwitchboardError`) say what to fix; the tool
 * answers them to the model as they are.
 */
export interface ScheduleJobs {
  list(): Promise<ScheduleJobView[]>;
  add(input: ScheduleJobInput, createdBy: string): Promise<ScheduleJobView>;
  remove(id: string): Promise<boolean>;
}

/** What the `schedule` tool needs. */
export interface ScheduleToolDeps {
  /** The scheduler, once it exists; undefined while it does not (the tool then says so). */
  jobs(): ScheduleJobs | undefined;
  /** The agent a job without `agentId` belongs to (the first configured agent). */
  defaultAgentId: string;
}

/** The channels a job can deliver to (`deliverTo.channel`, SPEC §17): the platform chats and the web chat. */
const DELIVERABLE = new Set<string>(['telegram', 'discord', 'slack', 'webchat']);

/** A `schedule` call refused; answered to the model as its message (outcome `error`). */
export class ScheduleToolError extends ToolErrorResult {
  constructor(message: string) {
    super(`Error: ${message}`);
    this.name = 'ScheduleToolError';
  }
}

/**
 * Where a job made in this turn delivers (SPEC §17): the chat the turn answers. A direct chat is named by its
 * chat id as `peer` (the id the channels send to: the Telegram user, the Discord DM channel, the Slack IM, the web
 * chat user), a group or channel by its chat id as `group`; a thread or forum topic is kept as `threadId`, so a
 * reminder asked in a Telegram topic comes back to that topic. An internal turn delivers where its answer goes
 * (a job's or a sub-agent report's chat). Undefined when the turn has no platform chat (the API, the CLI, an
 * internal turn without one).
 */
export function deliverToOf(message: InboundMessage): DeliverToConfig | undefined {
  const target = replyTargetOf(message);
  if (!target || !DELIVERABLE.has(target.channel) || !target.chatId) return undefined;
  return {
    channel: target.channel as DeliverToConfig['channel'],
    accountId: target.accountId || 'default',
    ...(target.chatType === 'direct' ? { peer: target.chatId } : { group: target.chatId }),
    ...(target.threadId ? { threadId: target.threadId } : {}),
  };
}

const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

/** `schedule` (SPEC §17, `group:schedule`, in preset `full` only): add, list and remove this agent's jobs. */
export function scheduleTools(deps: ScheduleToolDeps): Tool[] {
  const jobsOf = (): ScheduleJobs => {
    const jobs = deps.jobs();
    if (!jobs) throw new ScheduleToolError('scheduled jobs are not available on this gateway right now.');
    return jobs;
  };
  const owned = (view: ScheduleJobView, ctx: ToolContext) => (view.job.agentId ?? deps.defaultAgentId) === ctx.entry.agentId;

  const schedule = defineTool({
    name: 'schedule',
    group: 'group:schedule',
    description: 'Scheduled work in this chat. add: run `prompt` at `schedule` (a cron expression with 5 or 6 fields, "every 30m", '
      + 'or an ISO time for a one-off such as a reminder) and post the answer here; list: your jobs with their next run; remove: a job by id.',
    schema: z.object({
      action: z.enum(['add', 'list', 'remove']),
      schedule: z.string().trim().min(1).max(200).optional()
        .describe('add: cron ("0 9 * * 1-5"), "every 30m" (s, m, h, d), or an ISO time ("2026-05-01T17:00") for a one-off'),
      prompt: z.string().trim().min(1).max(20_000).optional().describe('add: what to do (or say) at each run; the answer is posted to this chat'),
      timezone: z.string().trim().min(1).max(64).optional().describe('add: IANA time zone of the schedule (default: this conversation\'s)'),
      id: jobId.optional().describe('add: an id for the job (default: one is made); remove: the job to remove'),
    }),
    async run({ action, schedule: when, prompt, timezone, id }, ctx: ToolContext) {
      if (action === 'list') {
        const views = (await jobsOf().list()).filter((v) => owned(v, ctx));
        return { jobs: views.map(describe) };
      }
      if (action === 'remove') {
        if (!id) throw new ScheduleToolError('action "remove" needs id (see action "list").');
        const jobs = jobsOf();
        const view = (await jobs.list()).find((v) => v.job.id === id && owned(v, ctx));
        if (!view) throw new ScheduleToolError(`there is no job "${id}" of this agent (see action "list").`);
        if (view.job.source === 'config') throw new ScheduleToolError(`job "${id}" comes from the config file; only the owner can remove it there.`);
        const removed = await refusals(() => jobs.remove(id));
        if (!removed) throw new ScheduleToolError(`there is no job "${id}" of this agent (see action "list").`);
        return { status: 'removed', id };
      }
      if (!when) throw new ScheduleToolError('action "add" needs schedule: a cron expression, "every 30m", or an ISO time for a one-off.');
      if (!prompt) throw new ScheduleToolError('action "add" needs prompt: what to do at each run.');
      const deliverTo = deliverToOf(ctx.message);
      if (!deliverTo) {
        throw new ScheduleToolError(`this conversation (channel ${ctx.message.channel}) has no chat a job could post to; `
          + 'jobs can be made from a Telegram, Discord, Slack or web chat conversation.');
      }
      const input: ScheduleJobInput = {
        schedule: when, prompt, agentId: ctx.entry.agentId, deliverTo, timezone: timezone ?? ctx.timezone, ...(id ? { id } : {}),
      };
      const view = await refusals(() => jobsOf().add(input, `tool:${ctx.entry.key}`));
      return { status: 'added', ...describe(view) };
    },
  });
  return [schedule];
}

/** A job as the model reads it. */
function describe(view: ScheduleJobView): Record<string, unknown> {
  const { job, state } = view;
  return {
    id: job.id,
    schedule: job.schedule,
    ...(job.timezone ? { timezone: job.timezone } : {}),
    prompt: job.prompt.length > 200 ? `${job.prompt.slice(0, 200)}…` : job.prompt,
    nextRunAt: iso(view.nextRunAt),
    ...(state.lastRunAt !== undefined ? { lastRunAt: iso(state.lastRunAt) } : {}),
    ...(state.lastOutcome ? { lastOutcome: state.lastOutcome } : {}),
    ...(state.lastError ? { lastError: state.lastError } : {}),
    ...(state.paused ? { paused: true } : {}),
    ...(job.enabled === false ? { enabled: false } : {}),
    source: job.source,
  };
}

/**
 * Runs a service call, answering the errors that say what to fix (an invalid or too frequent schedule, an
 * unknown zone, a taken id) to the model as its error text; anything else propagates (the registry reports it).
 */
async function refusals<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof Error && (error.name === 'ScheduleError' || (error instanceof SwitchboardError && error.status < 500))) {
      throw new ScheduleToolError(error.message);
    }
    throw error;
  }
}
