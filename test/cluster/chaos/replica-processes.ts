import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startProcess } from '../../helpers/process.ts';

/** One replica process of the chaos harness (its own state folder, the shared database). */
export interface ReplicaProcess {
  id: string;
  dir: string;
  /** Its base URL while it runs (a restart gets a new port). */
  url: string | undefined;
  state: 'running' | 'killed' | 'stopped';
  proc: ReturnType<typeof startProcess> | undefined;
  /** Every start of it, oldest first (their log lines stay readable). */
  starts: ReturnType<typeof startProcess>[];
}

/** What every replica shares. */
export interface ReplicaSettings {
  /** The shared PostgreSQL database; undefined: the embedded default (one machine, SQLite). */
  store: string | undefined;
  llmBaseURL: string;
  telegram: { token: string; apiRoot: string; webhookSecret: string };
  /** Slack Events over HTTP too, when given. */
  slack?: { botToken: string; signingSecret: string; apiUrl: string };
  maxConcurrent: number;
  laneLeaseMs: number;
  pollMs: number;
  logLevel?: string;
  /** Merged (deeply, objects only) over every replica's config: the chaos extras' jobs, goals, vision. */
  extraConfig?: Record<string, unknown>;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `over` merged into `base`: objects key by key, anything else (arrays included) replaced. */
export function mergeConfig(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = isObject(v) && isObject(out[k]) ? mergeConfig(out[k], v) : v;
  return out;
}

/** The config file of one replica: cluster mode, Telegram webhooks, its own API key so the fake LLM knows it. */
export function replicaConfig(id: string, settings: ReplicaSettings): Record<string, unknown> {
  return mergeConfig({
    ...(settings.store ? { store: settings.store, cluster: { replicaId: id, laneLeaseMs: settings.laneLeaseMs, pollMs: settings.pollMs } } : {}),
    logLevel: settings.logLevel ?? 'info',
    providers: { default: { baseUrl: settings.llmBaseURL, apiKey: `sk-${id}`, model: 'gpt-chaos', maxRetries: 0 } },
    channels: {
      telegram: { dmPolicy: 'open', mode: 'webhook', webhookSecret: settings.telegram.webhookSecret },
      ...(settings.slack ? { slack: { dmPolicy: 'open', mode: 'http' } } : {}),
    },
    session: { dmScope: 'per-peer', reset: { mode: 'off' }, maxActiveSessions: 100_000 },
    agents: { defaults: { tools: { preset: 'none' }, maxConcurrent: settings.maxConcurrent } },
  }, settings.extraConfig ?? {});
}

/** Starts, kills, freezes and thaws replica processes; only the pids it started. */
export class ReplicaSet {
  readonly replicas: ReplicaProcess[] = [];

  constructor(private readonly root: string, private readonly settings: ReplicaSettings) {}

  /** The base URLs of the replicas that run (a frozen one included: requests to it hang, as in production). */
  urls(): string[] {
    return this.replicas.filter((r) => r.state !== 'killed' && r.url).map((r) => r.url!);
  }

  /**
   * Creates and starts replica `id` (or starts it again on its state folder); resolves once it serves. `patch`
   * changes its config from this start on (merged over the shared one).
   */
  async start(id: string, patch?: Record<string, unknown>): Promise<ReplicaProcess> {
    let replica = this.replicas.find((r) => r.id === id);
    if (!replica) {
      const dir = path.join(this.root, id);
      mkdirSync(dir, { recursive: true });
      replica = { id, dir, url: undefined, state: 'killed', proc: undefined, starts: [] };
      this.replicas.push(replica);
    }
    if (patch || !replica.starts.length) {
      writeFileSync(path.join(replica.dir, 'switchboard.json'), JSON.stringify(mergeConfig(replicaConfig(id, this.settings), patch ?? {})));
    }
    const { telegram, slack } = this.settings;
    const proc = startProcess(replica.dir, {
      TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot,
      ...(slack ? { SLACK_BOT_TOKEN: slack.botToken, SLACK_SIGNING_SECRET: slack.signingSecret, SLACK_API_URL: slack.apiUrl } : {}),
    });
    replica.proc = proc;
    replica.starts.push(proc);
    // Read stderr too: a full pipe would block the process.
    proc.child.stderr?.on('data', (chunk: Buffer) => proc.lines.push(chunk.toString()));
    const url = await proc.url;
    replica.url = url;
    replica.state = 'running';
    return replica;
  }

  /** `kill -9`; resolves once the process is gone. */
  async kill(id: string): Promise<void> {
    const replica = this.get(id);
    replica.state = 'killed';
    replica.url = undefined;
    replica.proc?.child.kill('SIGKILL');
    await replica.proc?.exited;
  }

  /** `SIGSTOP`: the process freezes with its connections open. */
  freeze(id: string): void {
    const replica = this.get(id);
    replica.proc?.child.kill('SIGSTOP');
    replica.state = 'stopped';
  }

  /** `SIGCONT`. */
  thaw(id: string): void {
    const replica = this.get(id);
    replica.proc?.child.kill('SIGCONT');
    replica.state = 'running';
  }

  /** Ends every process this set started (SIGCONT first, so that a frozen one can die). */
  async stopAll(): Promise<void> {
    await Promise.all(this.replicas.map(async (r) => {
      if (!r.proc || r.proc.child.exitCode !== null || r.proc.child.signalCode !== null) return;
      r.proc.child.kill('SIGCONT');
      r.proc.child.kill('SIGKILL');
      await r.proc.exited;
    }));
  }

  private get(id: string): ReplicaProcess {
    const replica = this.replicas.find((r) => r.id === id);
    if (!replica) throw new Error(`no replica ${id}`);
    return replica;
  }
}
