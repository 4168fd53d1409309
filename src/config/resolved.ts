import type { MediaConfig, VisionSetting } from './media.ts';
import type { StreamingConfig } from './streaming.ts';
import type { MessagesConfig } from './queue-mode.ts';
import type { AckReactionConfig } from './ack-reaction.ts';
import type { ModelRef } from './model-refs.ts';
import type { AgentDefaults, DmPolicy, GroupPolicy, ParsedConfig, ProviderConfig, SessionConfig, ToolPolicy } from './schema.ts';

/** One bot identity of a platform, channel defaults merged with the account's own fields. */
export interface ChannelAccountConfig {
  accountId: string;
  enabled: boolean;
  dmPolicy: DmPolicy;
  allowFrom: string[];
  groupPolicy: GroupPolicy;
  /** Telegram `groups`, Discord `guilds`, Slack `channels`: the group allowlist. */
  groups: string[];
  requireMention: boolean;
  /** The reaction put on a message whose turn starts, per chat type (SPEC §16); unset: the defaults. */
  ackReaction?: AckReactionConfig;
  /** Longest inbound text (characters) this account takes; unset: `gateway.maxInboundChars`. */
  maxInboundChars?: number;
  /** Replies shown while they are written (SPEC §16); unset: the defaults. */
  streaming?: StreamingConfig;
}

export interface TelegramAccountConfig extends ChannelAccountConfig {
  botToken: string;
  apiRoot: string;
  mode: 'polling' | 'webhook';
  webhookSecret: string;
}
export interface DiscordAccountConfig extends ChannelAccountConfig {
  token: string;
  apiBase: string;
  /** Gateway shards (cluster mode holds each on one replica). */
  shardCount?: number;
}
export interface SlackAccountConfig extends ChannelAccountConfig {
  botToken: string;
  appToken: string;
  signingSecret: string;
  apiUrl: string;
  mode: 'socket' | 'http';
}

/** A configured provider with its kind decided (an openai one without key or base URL is `offline`) and its default model. */
export type ResolvedProvider = Omit<ProviderConfig, 'model'> & { id: string; model: string };

/** An agent with its defaults applied and paths made absolute. */
export interface AgentConfig {
  id: string;
  name: string;
  /** The provider of the agent's model. */
  providerId: string;
  model: string;
  /** Tried in order after the model fails (SPEC §18). */
  fallbacks: ModelRef[];
  workspace: string;
  systemPrompt?: string;
  /** The agent's tool policy: its own fields over `agents.defaults.tools`. */
  tools: ToolPolicy;
  /** Whether images reach the model as images: its own `vision`, else `agents.defaults.vision`. */
  vision: VisionSetting;
  /** Input + output tokens one session id may use (0 = no limit): its own, else `session.tokenBudget`. */
  tokenBudget: number;
}

/** The configuration the program runs with: validated, defaults filled, env applied, paths absolute. */
export interface ResolvedConfig {
  /** The file it came from, if any. */
  configPath?: string;
  gateway: ParsedConfig['gateway'];
  stateDir: string;
  /** keyv URI of the session store. */
  store: string;
  /** Cluster mode settings (used when `store` is a postgres:// URI). */
  cluster: ParsedConfig['cluster'];
  logLevel: ParsedConfig['logLevel'];
  /** Token ledger rotation and archives. */
  ledger: ParsedConfig['ledger'];
  providers: Record<string, ResolvedProvider>;
  agentDefaults: AgentDefaults;
  agents: AgentConfig[];
  session: SessionConfig;
  /** Which agent answers what (SPEC §12), validated against the agents and accounts. */
  bindings: ParsedConfig['bindings'];
  channels: {
    telegram: TelegramAccountConfig[];
    discord: DiscordAccountConfig[];
    slack: SlackAccountConfig[];
    webchat: { enabled: boolean; maxInboundChars?: number };
  };
  tools: ParsedConfig['tools'];
  limits: ParsedConfig['limits'];
  /** MCP servers, `${NAME}` references in `env` and `headers` replaced from the environment, `cwd` absolute. */
  mcp: ParsedConfig['mcp'];
  backgroundExecution: ParsedConfig['backgroundExecution'];
  /** Photos, voice notes and files (SPEC §15). */
  media: MediaConfig;
  /** Jobs of the config file (SPEC §17), schedules checked. */
  jobs: ParsedConfig['jobs'];
  scheduler: ParsedConfig['scheduler'];
  heartbeat?: ParsedConfig['heartbeat'];
  /** `hooks.token` (from `SWITCHBOARD_HOOKS_TOKEN` too): empty, the webhooks are off. */
  hooks: ParsedConfig['hooks'];
  /** How platform calls that were not taken are retried (SPEC §16). */
  delivery: ParsedConfig['delivery'];
  /** Queue modes (SPEC §16): the default, the collect debounce, and each channel's own. */
  messages: MessagesConfig;
  /** Every secret value in the config, scrubbed from logs and errors. */
  secrets: string[];
}
