import { z } from 'zod';
import { deliverToSchema, jobId } from '../config/scheduler.ts';
import { BadRequestError, NotFoundError } from '../core/errors.ts';
import type { JobInput, JobsService, JobView } from '../scheduler/jobs.ts';
import type { HttpApp } from './app.ts';
import { readJson } from './http-error.ts';

/** A job as `/admin/jobs`, the CLI and the dashboard see it: a {@link JobView} with every time an ISO string. */
export interface JobViewJson {
  job: Omit<JobView['job'], 'createdAt'> & { createdAt: string };
  state: Omit<JobView['state'], 'since' | 'lastDueAt' | 'lastRunAt'> & { since: string; lastDueAt?: string; lastRunAt?: string };
  nextRunAt?: string;
}

/** What the job routes need: the scheduler's {@link JobsService}. */
export interface JobRouteDeps {
  jobs: JobsService;
}

/** The body of `POST /admin/jobs`: a {@link JobInput} (SPEC §17). */
export const jobInputSchema = z.strictObject({
  id: jobId.optional(),
  schedule: z.string().trim().min(1).max(200),
  timezone: z.string().trim().min(1).max(100).optional(),
  prompt: z.string().min(1).max(20_000),
  agentId: z.string().min(1).max(100).optional(),
  deliverTo: deliverToSchema,
  session: z.string().min(1).max(500).optional(),
  tokenBudget: z.number().int().positive().optional(),
});

/** Who made a job, from the `X-Switchboard-Client` header (`cli`, `dashboard`), else `api`. */
const CLIENTS = new Set(['cli', 'dashboard']);

const iso = (ms: number | undefined) => (ms === undefined || !Number.isFinite(ms) ? undefined : new Date(ms).toISOString());

/** A view with its epoch-ms times as ISO strings (absent times stay absent). */
export function jobViewJson(view: JobView): JobViewJson {
  const { since, lastDueAt, lastRunAt, ...state } = view.state;
  const next = iso(view.nextRunAt);
  const due = iso(lastDueAt);
  const ran = iso(lastRunAt);
  return {
    job: { ...view.job, createdAt: iso(view.job.createdAt) ?? '' },
    state: { ...state, since: iso(since) ?? '', ...(due ? { lastDueAt: due } : {}), ...(ran ? { lastRunAt: ran } : {}) },
    ...(next ? { nextRunAt: next } : {}),
  };
}

/**
 * Checks a JSON body against a zod schema; a failure is a 400 naming the first bad field (`missing_field`,
 * `unknown_field` or `invalid_field`).
 */
export function parseBody<T extends z.ZodType>(schema: T, raw: unknown): z.output<T> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new BadRequestError('The body must be a JSON object.', 'invalid_body');
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const where = issue?.path.map(String).join('.') || 'body';
  if (issue?.code === 'unrecognized_keys') {
    const keys = issue.keys.map((k) => `"${k}"`).join(', ');
    throw new BadRequestError(`Unknown field${issue.keys.length === 1 ? '' : 's'} ${keys}${where === 'body' ? '' : ` in "${where}"`}.`, 'unknown_field');
  }
  if (issue?.code === 'invalid_type' && /received undefined/.test(issue.message)) throw new BadRequestError(`Field "${where}" is required.`, 'missing_field');
  throw new BadRequestError(`Field "${where}": ${issue?.message ?? 'bad value'}.`, 'invalid_field');
}

/** The `:id` of a job route; one that cannot be a job id names no job (404). */
function idParam(raw: string): string {
  if (!jobId.safeParse(raw).success) throw new NotFoundError(`No job "${raw.slice(0, 80)}".`, 'job_not_found');
  return raw;
}

/**
 * `/admin/jobs` (SPEC §17), behind the gateway's auth like the other admin routes: `GET` lists
 * `{ jobs: JobViewJson[] }`; `POST` adds a runtime job (201, its view); `DELETE /admin/jobs/:id` removes one;
 * `POST /admin/jobs/:id/run` queues a run now (202); `POST /admin/jobs/:id/pause` and `/resume` (its view).
 * The scheduler's own errors (an invalid or too frequent schedule, a config job that cannot be removed, an
 * unknown id) reach the caller with their status and code.
 */
export function mountJobRoutes(deps: JobRouteDeps): (app: HttpApp) => void {
  const { jobs } = deps;
  return (app) => {
    app.get('/admin/jobs', async (c) => c.json({ jobs: (await jobs.list()).map(jobViewJson) }));
    app.post('/admin/jobs', async (c) => {
      const input: JobInput = stripUndefined(parseBody(jobInputSchema, await readJson(c)));
      const client = c.req.header('x-switchboard-client')?.trim().toLowerCase() ?? '';
      const view = await jobs.add(input, CLIENTS.has(client) ? client : 'api');
      return c.json(jobViewJson(view), 201);
    });
    app.delete('/admin/jobs/:id', async (c) => {
      const id = idParam(c.req.param('id'));
      if (!(await jobs.remove(id))) throw new NotFoundError(`No job "${id}".`, 'job_not_found');
      return c.json({ removed: true, id });
    });
    app.post('/admin/jobs/:id/run', async (c) => {
      const id = idParam(c.req.param('id'));
      await jobs.runNow(id);
      return c.json({ queued: true, id }, 202);
    });
    for (const [action, paused] of [['pause', true], ['resume', false]] as const) {
      app.post(`/admin/jobs/:id/${action}`, async (c) => c.json(jobViewJson(await jobs.setPaused(idParam(c.req.param('id')), paused))));
    }
  };
}

/** Drops keys whose value is undefined (`exactOptionalPropertyTypes`-safe input for the service). */
function stripUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
