import type { ResolvedConfig } from '../config/resolved.ts';
import { StateLockedError, SwitchboardError } from '../core/errors.ts';
import { readStateOwner, StateLock, type StateOwner } from '../core/state-lock.ts';
import type { JobInput } from '../scheduler/jobs.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { JobViewJson } from '../http/job-routes.ts';

/** Where a command runs: against the gateway that owns the state folder, or in this process. */
export type CommandTarget = { kind: 'gateway'; client: GatewayClient; owner: StateOwner } | { kind: 'local' };

/** A gateway's URL as a local client reaches it (a wildcard bind is reached on loopback). */
export function reachableUrl(url: string): string {
  const u = new URL(url);
  if (u.hostname === '0.0.0.0') u.hostname = '127.0.0.1';
  if (u.hostname === '[::]') u.hostname = '[::1]';
  return u.origin;
}

/**
 * Finds the process that owns the state folder (SPEC §13). A running gateway is used over HTTP; with no
 * owner the command runs in-process; an in-process `switchboard chat` (no HTTP) is refused, naming it.
 * A gateway that holds the lock but has not written its URL yet is waited for up to `waitMs`.
 */
export async function findCommandTarget(config: ResolvedConfig, options: { waitMs?: number } = {}): Promise<CommandTarget> {
  const deadline = Date.now() + (options.waitMs ?? 3000);
  for (;;) {
    if (!(await StateLock.isHeld(config.stateDir))) return { kind: 'local' };
    const owner = readStateOwner(config.stateDir);
    if (owner?.role === 'gateway' && owner.url) return { kind: 'gateway', owner, client: new GatewayClient(reachableUrl(owner.url), config.gateway.authToken) };
    if (Date.now() >= deadline || owner?.role === 'cli') throw new StateLockedError(config.stateDir, owner);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A failure answered by the gateway, with its JSON error. */
export class GatewayRequestError extends SwitchboardError {
  constructor(status: number, message: string, code: string) {
    super(code, message, { status });
  }
}

/** One Server-Sent Event. */
export interface SseEvent {
  event: string;
  data: string;
}

/** HTTP to the running gateway, with the bearer token when one is configured. */
export class GatewayClient {
  readonly url: string;
  private readonly token: string;

  constructor(url: string, token = '') {
    this.url = url.replace(/\/+$/, '');
    this.token = token;
  }

  async get<T>(path: string): Promise<T> {
    return this.json<T>(await this.request('GET', path));
  }

  async post<T>(path: string, body: unknown, headers: Record<string, string> = {}): Promise<T> {
    return this.json<T>(await this.request('POST', path, body, headers));
  }

  async delete<T>(path: string): Promise<T> {
    return this.json<T>(await this.request('DELETE', path));
  }

  /** POSTs and calls `onEvent` for each Server-Sent Event of the answer, until the stream ends. */
  async stream(path: string, body: unknown, onEvent: (event: SseEvent) => void, signal?: AbortSignal): Promise<void> {
    const response = await this.request('POST', path, body, { accept: 'text/event-stream' }, signal);
    if (!response.ok) await this.json(response);
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true }).replace(/\r\n/g, '\n');
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = parseSseBlock(block);
        if (event) onEvent(event);
      }
    }
  }

  private async request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
    try {
      return await fetch(`${this.url}${path}`, {
        method,
        headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(this.token ? { authorization: `Bearer ${this.token}` } : {}), ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new SwitchboardError('GATEWAY_UNREACHABLE', `The running gateway at ${this.url} did not answer (${cause?.code ?? cause?.message ?? (error as Error).message}); check that it is up (switchboard doctor).`, { cause: error });
    }
  }

  private async json<T>(response: Response): Promise<T> {
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (response.ok) return parsed as T;
    if (response.status === 401) {
      const what = this.token ? 'refused the bearer token of this config' : 'needs a bearer token';
      throw new GatewayRequestError(401, `The gateway at ${this.url} ${what}: set SWITCHBOARD_AUTH_TOKEN (or gateway.authToken) to the token it runs with.`, 'UNAUTHORIZED');
    }
    const error = (parsed as { error?: { message?: string; code?: string } } | undefined)?.error;
    throw new GatewayRequestError(response.status, error?.message ?? `The gateway answered HTTP ${response.status}.`, (error?.code ?? `HTTP_${response.status}`).toUpperCase());
  }
}

function parseSseBlock(block: string): SseEvent | undefined {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (name === 'event') event = value;
    else if (name === 'data') data.push(value);
  }
  return data.length ? { event, data: data.join('\n') } : undefined;
}

/** Every session `GET /admin/sessions` of the running gateway lists for `query` (`channel`, `agent`, `limit` per page), page by page. */
export async function* gatewaySessions(client: GatewayClient, query: Record<string, string> = {}): AsyncIterable<SessionEntry> {
  let cursor: string | undefined;
  do {
    const params = new URLSearchParams({ limit: '1000', ...query, ...(cursor ? { cursor } : {}) });
    const page = await client.get<{ sessions: SessionEntry[]; nextCursor?: string }>(`/admin/sessions?${params}`);
    yield* page.sessions;
    cursor = page.nextCursor;
  } while (cursor);
}

/** The jobs of a running gateway (`/admin/jobs`, SPEC §17), as `switchboard jobs` uses them. */
export interface GatewayJobs {
  list(): Promise<JobViewJson[]>;
  /** Adds a runtime job, made by `cli`. */
  add(input: JobInput): Promise<JobViewJson>;
  remove(id: string): Promise<void>;
  /** Queues a run now. */
  run(id: string): Promise<void>;
  setPaused(id: string, paused: boolean): Promise<JobViewJson>;
}

/** {@link GatewayJobs} over HTTP; failures are {@link GatewayRequestError}s with the gateway's message. */
export function gatewayJobs(client: GatewayClient): GatewayJobs {
  const path = (id: string) => `/admin/jobs/${encodeURIComponent(id)}`;
  return {
    list: async () => (await client.get<{ jobs: JobViewJson[] }>('/admin/jobs')).jobs,
    add: (input) => client.post<JobViewJson>('/admin/jobs', input, { 'x-switchboard-client': 'cli' }),
    remove: async (id) => { await client.delete(path(id)); },
    run: async (id) => { await client.post(`${path(id)}/run`, {}); },
    setPaused: (id, paused) => client.post<JobViewJson>(`${path(id)}/${paused ? 'pause' : 'resume'}`, {}),
  };
}
