import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import JSON5 from 'json5';
import { ConfigError } from '../core/errors.ts';
import { validateBindings } from './validate-bindings.ts';
import { requireModelRef } from './model-refs.ts';
import { resolveMessages } from './queue-mode.ts';
import { describeConfigIssue, describeSyntaxError } from './config-errors.ts';
import { configSchema, type ParsedConfig } from './schema.ts';
import { resolveAckReaction, type AckReactionSetting } from './ack-reaction.ts';
import { resolveStreaming, type StreamingSetting } from './streaming.ts';
import type {
  ChannelAccountConfig, DiscordAccountConfig, ResolvedConfig, SlackAccountConfig, TelegramAccountConfig,
} from './resolved.ts';

/** Where each environment variable lands in the config (SPEC §9). */
export const ENV_BINDINGS: Record<string, string[]> = {
  TELEGRAM_BOT_TOKEN: ['channels', 'telegram', 'botToken'],
  TELEGRAM_API_ROOT: ['channels', 'telegram', 'apiRoot'],
  DISCORD_BOT_TOKEN: ['channels', 'discord', 'token'],
  DISCORD_API_BASE: ['channels', 'discord', 'apiBase'],
  SLACK_BOT_TOKEN: ['channels', 'slack', 'botToken'],
  SLACK_APP_TOKEN: ['channels', 'slack', 'appToken'],
  SLACK_SIGNING_SECRET: ['channels', 'slack', 'signingSecret'],
  SLACK_API_URL: ['channels', 'slack', 'apiUrl'],
  OPENAI_API_KEY: ['providers', 'default', 'apiKey'],
  OPENAI_BASE_URL: ['providers', 'default', 'baseUrl'],
  OPENAI_MODEL: ['providers', 'default', 'model'],
  SWITCHBOARD_AUTH_TOKEN: ['gateway', 'authToken'],
  SWITCHBOARD_HOOKS_TOKEN: ['hooks', 'token'],
  SWITCHBOARD_STATE_DIR: ['stateDir'],
  SWITCHBOARD_PORT: ['gateway', 'port'],
  SWITCHBOARD_HOST: ['gateway', 'host'],
  SWITCHBOARD_LOG_LEVEL: ['logLevel'],
  SWITCHBOARD_STORE: ['store'],
};

/** Inputs of {@link loadConfig}; all default to the process's own. */
export interface LoadConfigOptions {
  /** `--config FILE`; else `SWITCHBOARD_CONFIG`; else `switchboard.json` / `switchboard.json5` in `cwd`. */
  configPath?: string;
  cwd?: string;
  /** The environment; `.env` in `cwd` is read under it (real environment wins). */
  env?: NodeJS.ProcessEnv;
  /** Read `.env` (default true). */
  dotenv?: boolean;
  /** Extra values merged over the file (tests, CLI flags). */
  overrides?: Record<string, unknown>;
  /** Where override values came from, by key (`gateway.port` → `--port`), for error messages. */
  overrideSources?: Record<string, string>;
}

/** Reads, merges and validates the configuration. Throws ConfigError naming each bad key. */
export function loadConfig(options: LoadConfigOptions = {}): ResolvedConfig {
  const cwd = options.cwd ?? process.cwd();
  const env = mergedEnv(cwd, options.env ?? process.env, options.dotenv ?? true);
  const configPath = findConfigFile(cwd, options.configPath ?? env.SWITCHBOARD_CONFIG);
  const raw: Record<string, unknown> = configPath ? readConfigFile(configPath) : {};
  const fromEnv = new Map<string, string>();
  for (const [name, keyPath] of Object.entries(ENV_BINDINGS)) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    setPath(raw, keyPath, value);
    fromEnv.set(keyPath.join('.'), name);
  }
  if (options.overrides) deepMerge(raw, options.overrides);
  for (const [key, label] of Object.entries(options.overrideSources ?? {})) fromEnv.set(key, label);
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => describeConfigIssue(issue, configSchema, raw, fromEnv));
    const where = configPath ? ` in ${configPath}` : '';
    throw new ConfigError(`Invalid configuration${where}:\n  - ${issues.join('\n  - ')}`, issues);
  }
  const substituted: string[] = [];
  parsed.data.mcp = withEnvReferences(parsed.data.mcp, env, substituted);
  parsed.data.providers = withProviderEnv(parsed.data.providers, env, substituted);
  const resolved = resolveConfig(parsed.data, cwd, configPath);
  // A value put inside a longer one (`Bearer ${TOKEN}`) must stay out of logs on its own too.
  for (const value of substituted) if (value.length >= 6 && !resolved.secrets.includes(value)) resolved.secrets.push(value);
  return resolved;
}

/**
 * Replaces `${NAME}` in MCP servers' `env` and `headers` values from the environment (each value put in is
 * added to `substituted`); a missing name stops start-up, unless the server is disabled (`enabled: false`),
 * whose values are left as written.
 */
function withEnvReferences(mcp: ParsedConfig['mcp'], env: NodeJS.ProcessEnv, substituted: string[]): ParsedConfig['mcp'] {
  const servers: ParsedConfig['mcp']['servers'] = {};
  for (const [name, server] of Object.entries(mcp.servers)) {
    if (server.enabled === false) {
      servers[name] = server;
      continue;
    }
    const field = 'url' in server ? 'headers' : 'env';
    const values = 'url' in server ? server.headers : server.env;
    const resolved: Record<string, string> = {};
    for (const [key, value] of Object.entries(values)) {
      resolved[key] = value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, variable: string) => {
        const found = env[variable];
        if (found === undefined) throw new ConfigError(`Invalid configuration: mcp.servers.${name}.${field}.${key} names \${${variable}}, which is not set in the environment or .env.`);
        substituted.push(found);
        return found;
      });
    }
    servers[name] = { ...server, [field]: resolved };
  }
  return { ...mcp, servers };
}

/**
 * Providers' `apiKey`, `apiKeys` and `baseUrl` may name environment variables as `${NAME}`; an anthropic provider
 * without any key takes `ANTHROPIC_API_KEY`.
 */
function withProviderEnv(providers: ParsedConfig['providers'], env: NodeJS.ProcessEnv, substituted: string[]): ParsedConfig['providers'] {
  const out: ParsedConfig['providers'] = {};
  for (const [id, p] of Object.entries(providers)) {
    const expand = (value: string, key: string): string => value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, variable: string) => {
      const found = env[variable];
      if (found === undefined) throw new ConfigError(`Invalid configuration: providers.${id}.${key} names \${${variable}}, which is not set in the environment or .env.`);
      substituted.push(found.trim());
      return found.trim();
    });
    const resolved = { ...p, apiKey: expand(p.apiKey, 'apiKey'), baseUrl: expand(p.baseUrl, 'baseUrl'), apiKeys: p.apiKeys.map((k, i) => expand(k, `apiKeys[${i}]`)) };
    if (resolved.kind === 'anthropic' && !resolved.apiKey && !resolved.apiKeys.length && env.ANTHROPIC_API_KEY?.trim()) resolved.apiKey = env.ANTHROPIC_API_KEY.trim();
    out[id] = resolved;
  }
  return out;
}

function mergedEnv(cwd: string, env: NodeJS.ProcessEnv, readDotenv: boolean): NodeJS.ProcessEnv {
  const file = path.join(cwd, '.env');
  if (!readDotenv || !existsSync(file)) return env;
  return { ...parseDotenv(readFileSync(file)), ...env };
}

function findConfigFile(cwd: string, explicit: string | undefined): string | undefined {
  if (explicit) {
    const file = path.resolve(cwd, explicit);
    if (!existsSync(file)) throw new ConfigError(`Config file ${file} does not exist: check --config or SWITCHBOARD_CONFIG.`);
    return file;
  }
  for (const name of ['switchboard.json', 'switchboard.json5']) {
    const file = path.join(cwd, name);
    if (existsSync(file)) return file;
  }
  return undefined;
}

function readConfigFile(file: string): Record<string, unknown> {
  let value: unknown;
  const text = readFileSync(file, 'utf8');
  try {
    value = JSON5.parse(text);
  } catch (error) {
    throw new ConfigError(describeSyntaxError(file, text, error as Error));
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError(`${file} must hold one object ({ ... }).`);
  }
  return value as Record<string, unknown>;
}

function setPath(target: Record<string, unknown>, keyPath: string[], value: unknown): void {
  let node = target;
  for (const key of keyPath.slice(0, -1)) {
    const next = node[key];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[keyPath[keyPath.length - 1] as string] = value;
}

export function deepMerge(target: Record<string, unknown>, source: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(source)) {
    const current = target[key];
    if (value && typeof value === 'object' && !Array.isArray(value) && current && typeof current === 'object' && !Array.isArray(current)) {
      deepMerge(current as Record<string, unknown>, value as Record<string, unknown>);
    } else {
      target[key] = value;
    }
  }
}

/** The default model of each provider kind when `model` is not given. */
const DEFAULT_MODELS = { openai: 'gpt-4o-mini', anthropic: 'claude-sonnet-4-5', offline: 'offline' } as const;

/**
 * Each provider with its kind decided: an `openai` provider with no key and no base URL is the offline one
 * (a fresh checkout runs with no account); an `anthropic` one needs a key or a base URL.
 */
function resolveProviders(configured: ParsedConfig['providers']): ResolvedConfig['providers'] {
  const providers: ResolvedConfig['providers'] = {};
  for (const [id, p] of Object.entries(configured)) {
    const keyed = Boolean(p.apiKey || p.apiKeys.length);
    const offline = p.kind === 'offline' || (p.kind === 'openai' && !keyed && !p.baseUrl);
    if (p.kind === 'anthropic' && !keyed && !p.baseUrl) {
      throw new ConfigError(`Invalid configuration: providers.${id} is an anthropic provider without a key; set its apiKey (or apiKeys, or ANTHROPIC_API_KEY in the environment).`);
    }
    const model = offline && p.kind !== 'offline' ? 'offline' : p.model ?? DEFAULT_MODELS[p.kind];
    providers[id] = { ...p, id, kind: offline ? 'offline' : p.kind, model, models: offline ? [] : p.models.filter((m) => m !== model) };
  }
  return providers;
}

/** Applies defaults that depend on other keys, makes paths absolute, and expands channel accounts. */
export function resolveConfig(config: ParsedConfig, cwd: string, configPath?: string): ResolvedConfig {
  const stateDir = path.resolve(cwd, config.stateDir);
  const store = config.store ?? `sqlite://${path.join(stateDir, 'sessions.sqlite')}`;
  const providers = resolveProviders(config.providers);
  const defaults = config.agents.defaults;
  // The first agent keeps defaults.workspace; each other agent without its own gets a sibling folder `<workspace>-<id>`.
  const agents = config.agents.list.map((a, index) => {
    const ownProvider = a.provider ?? defaults.provider;
    const provider = providers[ownProvider];
    if (!provider) throw new ConfigError(`Invalid configuration: agents.list[${a.id}].provider names "${ownProvider}", which is not under providers.`);
    const modelText = a.model ?? defaults.model;
    const modelKey = a.model ? `agents.list[${a.id}].model` : 'agents.defaults.model';
    const primary = modelText ? requireModelRef(modelText, providers, ownProvider, modelKey) : { providerId: ownProvider, model: provider.model };
    const fallbacksKey = a.fallbacks ? `agents.list[${a.id}].fallbacks` : 'agents.defaults.fallbacks';
    const fallbacks = (a.fallbacks ?? defaults.fallbacks).map((f, i) => requireModelRef(f, providers, ownProvider, `${fallbacksKey}[${i}]`));
    return {
      id: a.id,
      name: a.name ?? (a.id === 'main' ? 'Switchboard' : a.id),
      providerId: primary.providerId,
      model: primary.model,
      fallbacks,
      workspace: path.resolve(cwd, a.workspace ?? (index === 0 ? defaults.workspace : `${defaults.workspace.replace(/[\\/]+$/, '')}-${a.id}`)),
      systemPrompt: a.systemPrompt ?? defaults.systemPrompt,
      tools: { preset: a.tools?.preset ?? defaults.tools.preset, allow: a.tools?.allow ?? defaults.tools.allow, deny: a.tools?.deny ?? defaults.tools.deny },
      tokenBudget: a.tokenBudget ?? config.session.tokenBudget,
      vision: a.vision ?? defaults.vision,
    };
  });
  const transcriber = config.media.transcription.provider;
  if (transcriber && !providers[transcriber]) throw new ConfigError(`Invalid configuration: media.transcription.provider names "${transcriber}", which is not under providers.`);
  const ids = new Set<string>();
  for (const a of agents) {
    if (ids.has(a.id)) throw new ConfigError(`Invalid configuration: agents.list has "${a.id}" twice.`);
    ids.add(a.id);
  }
  const c = config.channels;
  const telegram = expandAccounts(c.telegram, c.telegram.accounts, 'botToken', (base, acc) => ({
    botToken: acc.botToken ?? base.botToken,
    apiRoot: (acc.apiRoot ?? base.apiRoot).replace(/\/+$/, ''),
    mode: acc.mode ?? base.mode,
    webhookSecret: acc.webhookSecret ?? base.webhookSecret,
    groups: acc.groups ?? base.groups,
  })) as TelegramAccountConfig[];
  const discord = expandAccounts(c.discord, c.discord.accounts, 'token', (base, acc) => ({
    token: acc.token ?? base.token,
    apiBase: (acc.apiBase ?? base.apiBase).replace(/\/+$/, ''),
    groups: acc.guilds ?? base.guilds,
    shardCount: base.shardCount,
  })) as DiscordAccountConfig[];
  const slack = expandAccounts(c.slack, c.slack.accounts, 'botToken', (base, acc) => ({
    botToken: acc.botToken ?? base.botToken,
    appToken: acc.appToken ?? base.appToken,
    signingSecret: acc.signingSecret ?? base.signingSecret,
    apiUrl: normalizeSlackApiUrl(acc.apiUrl ?? base.apiUrl),
    mode: acc.mode ?? base.mode,
    groups: acc.channels ?? base.channels,
  })) as SlackAccountConfig[];
  const accounts: Record<string, string[]> = {
    telegram: telegram.map((a) => a.accountId), discord: discord.map((a) => a.accountId), slack: slack.map((a) => a.accountId),
    webchat: ['default'], cli: ['default'], api: ['default'],
  };
  validateBindings(config.bindings, agents.map((a) => a.id), (channel) => accounts[channel] ?? []);
  const secrets = collectSecrets(config);
  return {
    configPath,
    gateway: config.gateway,
    stateDir,
    store,
    cluster: config.cluster,
    logLevel: config.logLevel,
    ledger: config.ledger,
    providers,
    agentDefaults: { ...defaults, workspace: path.resolve(cwd, defaults.workspace) },
    agents,
    session: config.session,
    bindings: config.bindings,
    channels: { telegram, discord, slack, webchat: c.webchat },
    tools: config.tools,
    limits: config.limits,
    mcp: { ...config.mcp, servers: Object.fromEntries(Object.entries(config.mcp.servers).map(([name, server]) =>
      [name, 'command' in server && server.cwd ? { ...server, cwd: path.resolve(cwd, server.cwd) } : server])) },
    backgroundExecution: config.backgroundExecution,
    delivery: config.delivery,
    media: config.media,
    jobs: config.jobs,
    scheduler: config.scheduler,
    ...(config.heartbeat ? { heartbeat: config.heartbeat } : {}),
    hooks: config.hooks,
    messages: resolveMessages(config.messages, { telegram: c.telegram, discord: c.discord, slack: c.slack, webchat: c.webchat }),
    secrets,
  };
}

function normalizeSlackApiUrl(url: string): string {
  if (!url) return '';
  return url.endsWith('/') ? url : `${url}/`;
}

type AccountFields = { maxInboundChars?: number; ackReaction?: AckReactionSetting; streaming?: StreamingSetting; enabled?: boolean; dmPolicy?: ChannelAccountConfig['dmPolicy']; allowFrom?: string[]; groupPolicy?: ChannelAccountConfig['groupPolicy']; requireMention?: boolean };

function expandAccounts<B extends AccountFields & { dmPolicy: ChannelAccountConfig['dmPolicy']; allowFrom: string[]; groupPolicy: ChannelAccountConfig['groupPolicy']; requireMention: boolean }, A extends AccountFields>(
  base: B, accounts: Record<string, A>, tokenField: string, specific: (base: B, account: A) => Record<string, unknown>,
): ChannelAccountConfig[] {
  const out: ChannelAccountConfig[] = [];
  const entries: [string, A][] = Object.entries(accounts);
  const baseToken = (base as Record<string, unknown>)[tokenField];
  if (!entries.some(([id]) => id === 'default') && (entries.length === 0 || baseToken)) entries.unshift(['default', {} as A]);
  for (const [accountId, account] of entries) {
    const fields = specific(base, account);
    const token = fields[tokenField];
    const enabled = account.enabled ?? base.enabled ?? Boolean(token);
    out.push({
      accountId,
      enabled: enabled && base.enabled !== false,
      dmPolicy: account.dmPolicy ?? base.dmPolicy,
      allowFrom: account.allowFrom ?? base.allowFrom,
      groupPolicy: account.groupPolicy ?? base.groupPolicy,
      requireMention: account.requireMention ?? base.requireMention,
      ackReaction: resolveAckReaction(account.ackReaction, base.ackReaction),
      maxInboundChars: account.maxInboundChars ?? base.maxInboundChars,
      streaming: resolveStreaming(account.streaming, base.streaming),
      groups: [],
      ...fields,
    });
  }
  return out;
}

function collectSecrets(config: ParsedConfig): string[] {
  const values = new Set<string>();
  const add = (v: unknown) => { if (typeof v === 'string' && v.length >= 6) values.add(v); };
  add(config.gateway.authToken);
  add(config.hooks.token);
  // A database URI's password (postgres://user:password@host/db).
  if (config.store) { try { add(decodeURIComponent(new URL(config.store).password)); } catch { /* not a URL */ } }
  for (const p of Object.values(config.providers)) for (const key of [p.apiKey, ...p.apiKeys]) add(key);
  const c = config.channels;
  for (const t of [c.telegram, ...Object.values(c.telegram.accounts)]) { add(t.botToken); add(t.webhookSecret); }
  for (const d of [c.discord, ...Object.values(c.discord.accounts)]) add(d.token);
  for (const s of [c.slack, ...Object.values(c.slack.accounts)]) { add(s.botToken); add(s.appToken); add(s.signingSecret); }
  // MCP headers and server environments carry API keys; their values never reach a log.
  for (const server of Object.values(config.mcp.servers)) for (const v of Object.values('url' in server ? server.headers : server.env)) add(v);
  return [...values];
}

/** True when the process runs as an npm script (`npm start`), whose shell may not pass SIGTERM on. */
export function launchedByNpmScript(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.npm_lifecycle_event);
}
