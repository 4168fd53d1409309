import { z } from 'zod';
import { ackReactionSetting } from './ack-reaction.ts';
import { mediaSchema, visionSetting } from './media.ts';
import { heartbeatSchema, hooksSchema, jobSchema, schedulerSchema } from './scheduler.ts';
import { messagesSchema, queueModeSetting } from './queue-mode.ts';
import { streamingSetting } from './streaming.ts';

const dmScope = z.enum(['main', 'per-peer', 'per-channel-peer', 'per-account-channel-peer']);
const dmPolicy = z.enum(['pairing', 'allowlist', 'open', 'disabled']);
const groupPolicy = z.enum(['allowlist', 'open']);
const idList = z.array(z.union([z.string(), z.number()]).transform(String)).prefault([]);

/** An IANA time zone name, checked against the runtime's Intl database. */
export const timeZone = z.string().refine(isValidTimeZone, { message: 'expected an IANA time zone such as "Europe/Berlin"' });

export function isValidTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** A duration: milliseconds as a number, or a string like "90s", "5m", "2h", "1d". */
export const duration = z.union([z.number().nonnegative(), z.string().regex(/^\d+(\.\d+)?\s*(ms|s|m|h|d)$/, 'expected a duration like "5m"')])
  .transform((v) => (typeof v === 'number' ? v : parseDuration(v)));

export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/.exec(text.trim());
  if (!m) throw new Error(`not a duration: ${text}`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
  return Math.round(Number(m[1]) * unit);
}

/** A reset policy; every field optional so type/channel overrides can be merged over the base. */
export const resetPolicyPatch = z.strictObject({
  mode: z.enum(['daily', 'idle', 'off']).optional(),
  atHour: z.number().int().min(0).max(23).optional(),
  idleMinutes: z.number().nonnegative().optional(),
  timezone: timeZone.optional(),
});

const gateway = z.strictObject({
  host: z.string().min(1).default('127.0.0.1'),
  port: z.coerce.number().int().min(0).max(65535).default(18789),
  /** Surrounding whitespace is dropped: a token of only whitespace is no token (and a non-loopback host refuses to start). */
  authToken: z.string().default('').transform((token) => token.trim()),
  maxBodyBytes: z.number().int().positive().default(1_048_576),
  /** Longest inbound message text (characters) of any channel without its own `maxInboundChars`. */
  maxInboundChars: z.number().int().positive().default(32_000),
  /** Host names (beyond the loopback names and `host`) that requests may name in `Host`, e.g. the public name webhooks use. */
  allowedHosts: z.array(z.string().min(1)).default([]),
  /** How long shutdown waits for running turns before checkpointing them. */
  shutdownGraceMs: z.number().int().nonnegative().default(10_000),
});

/** A token or key: surrounding whitespace (a trailing newline from .env or a secrets file) is not part of it. */
const secret = z.string().transform((value) => value.trim());

const provider = z.strictObject({
  kind: z.enum(['openai', 'anthropic', 'offline']).default('openai'),
  baseUrl: z.string().default(''),
  apiKey: secret.default(''),
  /** More keys to rotate through after `apiKey` (SPEC §18): a failed key is cooled down and the next one tried. */
  apiKeys: z.array(secret.pipe(z.string().min(1, 'an empty key'))).default([]),
  /** Default model; absent: `gpt-4o-mini` (openai) or `claude-sonnet-4-5` (anthropic). */
  model: z.string().min(1).optional(),
  /** What the provider serves besides `model`, for `/model` and fallbacks. */
  models: z.array(z.string().min(1)).default([]),
  contextWindow: z.number().int().positive().default(128_000),
  maxTokens: z.number().int().positive().default(4096),
  correlationHeader: z.string().min(1).default('X-Switchboard-Correlation-Id'),
  /** Retries on 429/5xx/connection errors, with backoff (Retry-After honoured). */
  maxRetries: z.number().int().min(0).max(10).default(2),
  timeoutMs: z.number().int().positive().default(120_000),
  /** Ask for usage in streamed responses (`stream_options.include_usage`). */
  streamUsage: z.boolean().default(true),
});

const compaction = z.strictObject({
  enabled: z.boolean().default(true),
  reserveTokens: z.number().int().nonnegative().default(16_384),
  keepRecentTokens: z.number().int().nonnegative().default(20_000),
  memoryFlush: z.boolean().default(true),
});

const contextPruning = z.strictObject({
  mode: z.enum(['cache-ttl', 'off']).default('cache-ttl'),
  ttl: duration.default(300_000),
  keepLastAssistants: z.number().int().nonnegative().default(3),
});

/** Tool presets of SPEC §11. */
export const TOOL_PRESETS = ['full', 'messaging', 'minimal', 'none'] as const;
// `group:mcp:<server>` is read as `mcp:<server>`, the group the server's tools are in.
const toolName = z.string().regex(/^((group|mcp):[a-zA-Z0-9_:-]+|[a-zA-Z0-9_-]{1,64})$/, 'expected a tool name, group:<name> or mcp:<server>')
  .transform((name) => name.replace(/^group:mcp:/, 'mcp:'));
const toolPolicy = z.strictObject({
  preset: z.enum(TOOL_PRESETS).default('messaging'),
  allow: z.array(toolName).default([]),
  deny: z.array(toolName).default([]),
});
const agentToolPolicy = z.strictObject({
  preset: z.enum(TOOL_PRESETS).optional(),
  allow: z.array(toolName).optional(),
  deny: z.array(toolName).optional(),
});

/** `"<provider>/<model>"`, or a model of the agent's own provider. */
const modelRef = z.string().min(1);

const agentDefaults = z.strictObject({
  provider: z.string().default('default'),
  model: modelRef.optional(),
  /** Tried in order when the model fails with a rate limit, overload, timeout, 5xx or auth error (SPEC §18). */
  fallbacks: z.array(modelRef).default([]),
  workspace: z.string().default('./workspace'),
  maxConcurrent: z.number().int().positive().default(4),
  maxIterationsPerBatch: z.number().int().positive().default(20),
  bootstrapMaxChars: z.number().int().positive().default(20_000),
  bootstrapTotalMaxChars: z.number().int().positive().default(150_000),
  systemPrompt: z.string().optional(),
  compaction: compaction.prefault({}),
  contextPruning: contextPruning.prefault({}),
  /** How long one turn may run before it is stopped. */
  turnTimeoutMs: z.number().int().positive().default(600_000),
  tools: toolPolicy.prefault({}),
  /** Whether images reach the model as images (SPEC §15). */
  vision: visionSetting.default('auto'),
});

const agent = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9_-]*$/, 'expected a lowercase id (letters, digits, - and _)'),
  name: z.string().optional(),
  provider: z.string().optional(),
  model: modelRef.optional(),
  fallbacks: z.array(modelRef).optional(),
  workspace: z.string().optional(),
  systemPrompt: z.string().optional(),
  tools: agentToolPolicy.optional(),
  tokenBudget: z.number().int().nonnegative().optional(),
  vision: visionSetting.optional(),
});

const session = z.strictObject({
  dmScope: dmScope.default('main'),
  threads: z.enum(['separate', 'parent']).default('separate'),
  identityLinks: z.record(z.string(), z.array(z.string())).default({}),
  maxActiveSessions: z.number().int().positive().default(10_000),
  reset: resetPolicyPatch.prefault({}),
  resetByType: z.strictObject({ direct: resetPolicyPatch.optional(), group: resetPolicyPatch.optional(), thread: resetPolicyPatch.optional() }).prefault({}),
  resetByChannel: z.record(z.string(), resetPolicyPatch).default({}),
  resetTriggers: z.array(z.string().min(1)).default(['/new', '/reset']),
  notifyOnReset: z.boolean().default(true),
  resetArchiveRetentionDays: z.number().nonnegative().default(30),
  /** Input + output tokens one session id may use (0 = no limit); per agent in `agents.list[].tokenBudget`. */
  tokenBudget: z.number().int().nonnegative().default(0),
  /** Skipped group messages kept as context for the next run. */
  groupContextLimit: z.number().int().min(0).max(500).default(50),
});

const reservedAccountIds = new Set(['direct', 'dm', 'group', 'channel', 'thread', 'topic', 'main']);
const accountId = z.string().regex(/^[a-z0-9][a-z0-9_-]*$/, 'expected a lowercase account id').refine((id) => !reservedAccountIds.has(id), 'this word is reserved in session keys');

const commonChannel = {
  enabled: z.boolean().optional(),
  dmPolicy: dmPolicy.default('pairing'),
  allowFrom: idList,
  requireMention: z.boolean().default(true),
  /** The reaction put on a message whose turn starts (SPEC §16); unset: 👀 in groups, none in direct messages. */
  ackReaction: ackReactionSetting,
  /** Longest inbound message text (characters); defaults to `gateway.maxInboundChars`. */
  maxInboundChars: z.number().int().positive().optional(),
  /** Replies shown while they are written (SPEC §16). */
  streaming: streamingSetting,
  /** This channel's queue mode (SPEC §16); unset: `messages.queue.mode`. */
  queueMode: queueModeSetting.optional(),
};
const maxInboundChars = z.number().int().positive().optional();

const telegramAccount = z.strictObject({
  enabled: z.boolean().optional(),
  botToken: secret.optional(),
  apiRoot: z.string().optional(),
  mode: z.enum(['polling', 'webhook']).optional(),
  webhookSecret: secret.optional(),
  dmPolicy: dmPolicy.optional(),
  allowFrom: idList.optional(),
  groupPolicy: groupPolicy.optional(),
  groups: idList.optional(),
  requireMention: z.boolean().optional(),
  ackReaction: ackReactionSetting,
  maxInboundChars,
  streaming: streamingSetting,
});
const telegram = z.strictObject({
  ...commonChannel,
  botToken: secret.default(''),
  apiRoot: z.string().default(''),
  mode: z.enum(['polling', 'webhook']).default('polling'),
  webhookSecret: secret.default(''),
  groupPolicy: groupPolicy.default('allowlist'),
  groups: idList,
  accounts: z.record(accountId, telegramAccount).default({}),
});

const discordAccount = z.strictObject({
  enabled: z.boolean().optional(),
  token: secret.optional(),
  apiBase: z.string().optional(),
  dmPolicy: dmPolicy.optional(),
  allowFrom: idList.optional(),
  groupPolicy: groupPolicy.optional(),
  guilds: idList.optional(),
  requireMention: z.boolean().optional(),
  ackReaction: ackReactionSetting,
  maxInboundChars,
  streaming: streamingSetting,
});
const discord = z.strictObject({
  ...commonChannel,
  token: secret.default(''),
  apiBase: z.string().default(''),
  groupPolicy: groupPolicy.default('allowlist'),
  guilds: idList,
  /** Cluster mode: gateway shards of each bot; each is held by one replica at a time (SPEC §13). */
  shardCount: z.number().int().min(1).max(64).default(1),
  accounts: z.record(accountId, discordAccount).default({}),
});

const slackAccount = z.strictObject({
  enabled: z.boolean().optional(),
  botToken: secret.optional(),
  appToken: secret.optional(),
  signingSecret: secret.optional(),
  apiUrl: z.string().optional(),
  mode: z.enum(['socket', 'http']).optional(),
  dmPolicy: dmPolicy.optional(),
  allowFrom: idList.optional(),
  groupPolicy: groupPolicy.optional(),
  channels: idList.optional(),
  requireMention: z.boolean().optional(),
  ackReaction: ackReactionSetting,
  maxInboundChars,
  streaming: streamingSetting,
});
const slack = z.strictObject({
  ...commonChannel,
  botToken: secret.default(''),
  appToken: secret.default(''),
  signingSecret: secret.default(''),
  apiUrl: z.string().default(''),
  mode: z.enum(['socket', 'http']).default('socket'),
  groupPolicy: groupPolicy.default('allowlist'),
  channels: idList,
  accounts: z.record(accountId, slackAccount).default({}),
});

const webchat = z.strictObject({ enabled: z.boolean().default(true), maxInboundChars, queueMode: queueModeSetting.optional() });

/** The token ledger's rotation and archives (SPEC §4). */
const ledger = z.strictObject({
  /** `size`: a new file once the current one passes `maxFileBytes`; `daily`: also at each UTC midnight; `off`: one file forever. */
  rotate: z.enum(['size', 'daily', 'off']).default('size'),
  maxFileBytes: z.number().int().min(4096).default(16 * 1024 * 1024),
  /** Compressed archives older than this are deleted (0 keeps them forever); their tokens stay in the totals. */
  retentionDays: z.number().nonnegative().default(365),
});

/** An MCP server's name: the prefix of its tools (`<name>__<tool>`) and its group (`mcp:<name>`). */
const mcpServerName = z.string().regex(/^[a-zA-Z0-9_-]{1,32}$/, 'expected 1-32 letters, digits, - or _');
/** A value that may name environment variables as `${NAME}` (secrets stay out of the file). */
const envString = z.string();
const mcpStdio = z.strictObject({
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  env: z.record(z.string(), envString).default({}),
  cwd: z.string().optional(),
  enabled: z.boolean().default(true),
  /** Overrides `mcp.connectTimeoutMs` for this server. */
  connectTimeoutMs: z.number().int().positive().optional(),
}).describe('stdio');
const mcpHttp = z.strictObject({
  url: z.url({ protocol: /^https?$/ }),
  headers: z.record(z.string(), envString).default({}),
  enabled: z.boolean().default(true),
  connectTimeoutMs: z.number().int().positive().optional(),
}).describe('Streamable HTTP');
const mcp = z.strictObject({
  /**
   * How long connecting (start-up of a stdio server, `initialize`, `tools/list`) may take before the server counts as
   * failed; also the longest a turn waits for a server still connecting (SPEC §11).
   */
  connectTimeoutMs: z.number().int().positive().default(10_000),
  servers: z.record(mcpServerName, z.union([mcpStdio, mcpHttp])).default({}),
});

/**
 * A platform id in a binding, as a string. A number is accepted only while it is exact: a Discord snowflake
 * written without quotes has already lost its last digits when the JSON is read.
 */
const platformId = z.union([z.string().min(1), z.number()]).transform((id, ctx) => {
  if (typeof id === 'number' && !Number.isSafeInteger(id)) {
    ctx.addIssue({ code: 'custom', message: `${id} is too long to be exact as a JSON number (its last digits are already lost); quote the id: "…"` });
    return z.NEVER;
  }
  return String(id);
});

/** A binding (SPEC §12): which agent answers messages matching `match`; the most specific match wins. */
const binding = z.strictObject({
  agentId: z.string().min(1),
  match: z.strictObject({
    channel: z.enum(['telegram', 'discord', 'slack', 'webchat', 'cli', 'api']),
    accountId: z.string().min(1).optional(),
    peer: z.strictObject({ kind: z.enum(['direct', 'group', 'channel']), id: platformId }).optional(),
    guildId: platformId.optional(),
    teamId: z.string().min(1).optional(),
  }),
});

/** The whole configuration file (SPEC §9). Every key is optional; defaults are SPEC's. */
export const configSchema = z.strictObject({
  $schema: z.string().optional(),
  gateway: gateway.prefault({}),
  stateDir: z.string().min(1).default('./data'),
  store: z.string().optional(),
  /** Cluster mode (`store: "postgres://…"`, SPEC §13). */
  cluster: z.strictObject({
    /** This replica's name in /status (default: host name and pid). */
    replicaId: z.string().regex(/^[A-Za-z0-9._:-]{1,64}$/, 'letters, digits and . _ : - (at most 64)').optional(),
    /** How long a frozen replica keeps its sessions before PostgreSQL ends its connections and others take over. */
    laneLeaseMs: z.number().int().min(2000).max(600_000).default(30_000),
    /** How often a replica looks for queued work it was not notified of. */
    pollMs: z.number().int().min(50).max(60_000).default(1000),
  }).prefault({}),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ledger: ledger.prefault({}),
  providers: z.record(z.string(), provider.prefault({})).prefault({ default: {} }),
  agents: z.strictObject({
    defaults: agentDefaults.prefault({}),
    list: z.array(agent).min(1).default([{ id: 'main' }]),
  }).prefault({}),
  bindings: z.array(binding).default([]),
  session: session.prefault({}),
  channels: z.strictObject({
    telegram: telegram.prefault({}),
    discord: discord.prefault({}),
    slack: slack.prefault({}),
    webchat: webchat.prefault({}),
  }).prefault({}),
  tools: z.strictObject({
    timeoutSeconds: z.number().positive().max(3600).default(60),
    /** Largest tool result kept in the transcript and sent to the model (characters); longer ones are cut with a note. */
    maxResultChars: z.number().int().min(1000).default(50_000),
    sessions: z.strictObject({
      visibility: z.enum(['tree', 'agent', 'all']).default('tree'),
      maxSpawnDepth: z.number().int().min(0).max(10).default(2),
      maxChildren: z.number().int().min(0).max(100).default(5),
    }).prefault({}),
  }).prefault({}),
  mcp: mcp.prefault({}),
  limits: z.strictObject({
    perSender: z.strictObject({ perMinute: z.number().nonnegative().default(0), burst: z.number().int().nonnegative().default(0) }).prefault({}),
  }).prefault({}),
  /** Queue modes: what a busy session does with the next message (SPEC §16). */
  messages: messagesSchema.prefault({}),
  /** Photos, voice notes and files (SPEC §15). */
  media: mediaSchema.prefault({}),
  /** Scheduled jobs, heartbeat and webhooks (SPEC §17). */
  jobs: z.array(jobSchema).default([]),
  scheduler: schedulerSchema.prefault({}),
  heartbeat: heartbeatSchema.optional(),
  hooks: hooksSchema.prefault({}),
  /** Replies the platform did not take (reset, timeout, 5xx, 429) are sent again (SPEC §16). */
  delivery: z.strictObject({
    /** Attempts in all for one platform call, the first included. */
    maxAttempts: z.number().int().min(1).max(50).default(8),
    /** First wait between attempts (ms); doubles with each failure, with jitter, up to `retryMaxMs`. */
    retryBaseMs: z.number().int().min(0).max(60_000).default(500),
    retryMaxMs: z.number().int().min(0).max(600_000).default(30_000),
  }).prefault({}),
  backgroundExecution: z.strictObject({
    enabled: z.boolean().default(false),
    maxConcurrentBackgroundTurns: z.number().int().positive().default(3),
    maxBatchesPerGoal: z.number().int().positive().default(10),
    autoResumeOnStartup: z.boolean().default(true),
    tokenBudget: z.number().int().nonnegative().default(128_000),
    maxWallClockMinutes: z.number().nonnegative().default(360),
    maxToolCalls: z.number().int().nonnegative().default(1000),
  }).prefault({}),
});

/** The config as written (before defaults). */
export type ConfigInput = z.input<typeof configSchema>;
/** The parsed file with every default filled in. */
export type ParsedConfig = z.output<typeof configSchema>;
export type ProviderConfig = z.output<typeof provider>;
export type ResetPolicyPatch = z.output<typeof resetPolicyPatch>;
export type SessionConfig = z.output<typeof session>;
export type AgentDefaults = z.output<typeof agentDefaults>;
export type ToolPolicy = z.output<typeof toolPolicy>;
export type Binding = z.output<typeof binding>;
export type McpServerConfig = z.output<typeof mcpStdio> | z.output<typeof mcpHttp>;
export type ToolPreset = (typeof TOOL_PRESETS)[number];
export type DmScope = z.output<typeof dmScope>;
export type DmPolicy = z.output<typeof dmPolicy>;
export type GroupPolicy = z.output<typeof groupPolicy>;
export type TelegramConfig = z.output<typeof telegram>;
export type DiscordConfig = z.output<typeof discord>;
export type SlackConfig = z.output<typeof slack>;
export type LedgerConfig = z.output<typeof ledger>;
