import type { ResolvedConfig } from '../config/resolved.ts';
import { SwitchboardError } from '../core/errors.ts';
import type { JobViewJson } from '../http/job-routes.ts';
import type { JobInput } from '../scheduler/jobs.ts';
import { findCommandTarget, gatewayJobs, type GatewayJobs } from './gateway-client.ts';

/** Options of `switchboard jobs add` (commander's names). */
export interface JobsAddOptions {
  schedule: string;
  prompt: string;
  channel: string;
  peer?: string;
  group?: string;
  thread?: string;
  account?: string;
  agent?: string;
  tz?: string;
  id?: string;
  session?: string;
  tokenBudget?: string;
}

/**
 * The jobs of the gateway that owns the state folder, over its HTTP API. Jobs live in the running gateway's
 * scheduler, so with no gateway running this is an error that says to start one.
 */
export async function jobsOfGateway(config: ResolvedConfig): Promise<GatewayJobs> {
  const target = await findCommandTarget(config);
  if (target.kind === 'local') {
    throw new SwitchboardError('GATEWAY_NOT_RUNNING', `No gateway runs on the state folder ${config.stateDir}: jobs are kept and run by the gateway, so start it (switchboard start) and try again.`);
  }
  return gatewayJobs(target.client);
}

const time = (iso: string | undefined) => (iso ? iso.replace(/:\d{2}\.\d{3}Z$/, 'Z').replace('T', ' ') : '-');

/** The schedule as the table shows it: with its time zone when it has one. */
const scheduleOf = (v: JobViewJson) => (v.job.timezone ? `${v.job.schedule} (${v.job.timezone})` : v.job.schedule);

function pausedOf(v: JobViewJson): string {
  if (v.job.enabled === false) return 'disabled';
  return v.state.paused ? 'paused' : '-';
}

function lastRunOf(v: JobViewJson): string {
  if (!v.state.lastRunAt) return '-';
  return `${time(v.state.lastRunAt)} ${v.state.lastOutcome ?? ''}`.trim();
}

/** The jobs as a table: id, schedule, next run, last run and outcome, paused (UTC times to the minute). */
export function jobsTable(views: readonly JobViewJson[]): string {
  const head = ['ID', 'SCHEDULE', 'NEXT RUN', 'LAST RUN', 'PAUSED'];
  const rows = views.map((v) => [v.job.id, scheduleOf(v), time(v.nextRunAt), lastRunOf(v), pausedOf(v)]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ');
  return [line(head), ...rows.map(line)].join('\n') + '\n';
}

/** `switchboard jobs list [--json]`. */
export async function jobsList(jobs: GatewayJobs, json: boolean, out: NodeJS.WritableStream): Promise<void> {
  const views = await jobs.list();
  if (json) out.write(`${JSON.stringify({ jobs: views }, null, 2)}\n`);
  else out.write(views.length ? jobsTable(views) : 'No jobs. Add one with switchboard jobs add --schedule "0 8 * * *" --prompt "…" --channel telegram --peer <id>.\n');
}

/** The job `switchboard jobs add` asks for; the gateway checks the rest (schedule, target, id). */
export function jobInputOf(options: JobsAddOptions): JobInput {
  let tokenBudget: number | undefined;
  if (options.tokenBudget !== undefined) {
    tokenBudget = Number(options.tokenBudget);
    if (!Number.isInteger(tokenBudget) || tokenBudget <= 0) throw new SwitchboardError('INVALID_OPTION', `--token-budget must be a positive whole number, got "${options.tokenBudget}".`);
  }
  if (Boolean(options.peer) === Boolean(options.group)) {
    throw new SwitchboardError('INVALID_OPTION', 'Name exactly one of --peer (a direct chat) and --group (a group or channel) for where the answer goes.');
  }
  return {
    schedule: options.schedule, prompt: options.prompt,
    deliverTo: {
      channel: options.channel as JobInput['deliverTo']['channel'], accountId: options.account ?? 'default',
      ...(options.peer ? { peer: options.peer } : {}), ...(options.group ? { group: options.group } : {}), ...(options.thread ? { threadId: options.thread } : {}),
    },
    ...(options.id ? { id: options.id } : {}), ...(options.tz ? { timezone: options.tz } : {}), ...(options.agent ? { agentId: options.agent } : {}),
    ...(options.session ? { session: options.session } : {}), ...(tokenBudget !== undefined ? { tokenBudget } : {}),
  };
}

/** `switchboard jobs add …`. */
export async function jobsAdd(jobs: GatewayJobs, options: JobsAddOptions, out: NodeJS.WritableStream): Promise<void> {
  const view = await jobs.add(jobInputOf(options));
  out.write(`Added job ${view.job.id} (${scheduleOf(view)}); next run ${time(view.nextRunAt)}.\n`);
}

/** `switchboard jobs remove <id>`. */
export async function jobsRemove(jobs: GatewayJobs, id: string, out: NodeJS.WritableStream): Promise<void> {
  await jobs.remove(id);
  out.write(`Removed job ${id}.\n`);
}

/** `switchboard jobs run <id>`. */
export async function jobsRun(jobs: GatewayJobs, id: string, out: NodeJS.WritableStream): Promise<void> {
  await jobs.run(id);
  out.write(`Queued a run of job ${id}; its answer goes where the job delivers.\n`);
}

/** `switchboard jobs pause <id>` and `resume <id>`. */
export async function jobsSetPaused(jobs: GatewayJobs, id: string, paused: boolean, out: NodeJS.WritableStream): Promise<void> {
  const view = await jobs.setPaused(id, paused);
  out.write(paused ? `Paused job ${view.job.id}.\n` : `Resumed job ${view.job.id}; next run ${time(view.nextRunAt)}.\n`);
}
