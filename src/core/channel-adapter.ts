import type { Attachment, ChannelId, DeliveryTarget, InboundMessage, MediaDownload, OutboundMessage } from './message.ts';

/** Token usage of one turn or one LLM call, normalized across providers. */
export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Of `outputTokens`, those the model spent reasoning (never shown in a chat), where the provider reports them. */
  reasoningTokens?: number;
}

/** What a finished turn produced. */
export interface TurnResult {
  sessionKey: string;
  sessionId: string;
  correlationId: string;
  replies: OutboundMessage[];
  /** Usage of this turn only (all of its LLM calls). */
  usage: TokenUsage;
  /** True when any usage figure of the turn was estimated with the tokenizer. */
  usageEstimated: boolean;
  /** The model that answered, when an LLM ran. */
  model?: string;
  /** How the turn ended. */
  outcome: 'replied' | 'command' | 'failed' | 'stopped' | 'skipped';
  /** The batch reached its limit on a goal run: the gateway queues a background continuation (SPEC §11). */
  continuation?: { deliverTo?: DeliveryTarget };
}

/** Options a built-in channel may pass with a message. */
export interface SubmitOptions {
  /** Receives the reply text as it streams. */
  onDelta?: (text: string) => void;
  /** Aborts this turn (an HTTP caller that went away). */
  signal?: AbortSignal;
}

/** The gateway's answer to a submitted message. */
export interface Submission {
  /**
   * `accepted`: queued on its session's lane; `duplicate`: a redelivery already processed;
   * `blocked`: refused by the DM/group policy (a pairing code may have been sent); `skipped`: kept as
   * group context without a run; `rate_limited`: over `limits.perSender` (not queued, SPEC §14).
   */
  status: 'accepted' | 'duplicate' | 'blocked' | 'skipped' | 'rate_limited';
  /** For `rate_limited`: seconds until the sender may write again. */
  retryAfterSeconds?: number;
  sessionKey?: string;
  correlationId: string;
  /** Settles when the turn is over (at once unless accepted). Never rejects. */
  done: Promise<TurnResult | undefined>;
}

/**
 * The only handle a channel has on the core. Resolves once the message is accepted (not when it is
 * answered), so a channel never blocks its intake on a running turn.
 */
export type InboundSink = (message: InboundMessage, options?: SubmitOptions) => Promise<Submission>;

/** An HTTP route a channel serves on the gateway's own server (webhooks, the web chat). */
export interface HttpRoute {
  method: 'GET' | 'POST';
  /** Hono-style path, e.g. `/webhooks/telegram/:accountId`. */
  path: string;
  handle(request: Request, params: Record<string, string>, context: { correlationId: string }): Promise<Response>;
}

/**
 * Reported by `GET /status`. `standby`: in cluster mode, another replica holds this channel's lease (the
 * Telegram poller, a Discord shard); this one takes over when that one dies, and still sends replies.
 */
export type ChannelStatus = 'starting' | 'running' | 'standby' | 'stopped' | 'failed' | 'disabled';

/**
 * A reply shown while it is written (SPEC §16), in the platform's own calls: the gateway decides when
 * (`src/gateway/live-reply.ts`); the channel renders, posts and edits. Every part is a whole message in
 * valid markup, whatever prefix of an answer it was rendered from.
 */
export interface LiveReplyCalls {
  /**
   * The messages `message` becomes on this platform, rendered and split as {@link ChannelAdapter.send} would
   * (a part with no visible text is left out). Pure.
   */
  render(message: OutboundMessage): string[];
  /** Posts one rendered part (into the target's thread; `replyTo` the message it answers, for the first part). Resolves with its message id. */
  post(target: DeliveryTarget, part: string, options: { replyTo?: string; threadId?: string }): Promise<string>;
  /** Replaces the text of a posted message with a rendered part. A platform's "not modified" is not an error. */
  edit(target: DeliveryTarget, messageId: string, part: string): Promise<void>;
  /**
   * The reply is complete (or given up): a platform that streams natively closes the message's stream (Slack
   * `chat.stopStream`). Called for each posted message after its last edit, perhaps more than once (a second
   * call does nothing); absent: nothing to close.
   */
  end?(target: DeliveryTarget, messageId: string): Promise<void>;
}

/** One bot identity on one platform. Created by `channels/<name>/index.ts`. */
export interface ChannelAdapter {
  readonly id: ChannelId;
  readonly accountId: string;
  /** Current state; `failed` carries `statusDetail`. */
  readonly status: ChannelStatus;
  readonly statusDetail?: string;
  /**
   * The error behind a `failed` state reached after start-up (a token revoked mid-run), with its code, so the
   * supervisor can tell a definite auth failure (stop retrying) from a passing one.
   */
  readonly lastFailure?: Error;
  /** Starts intake. Rejects with a ChannelError (one clear line) when the channel cannot start. */
  start(sink: InboundSink): Promise<void>;
  /** Stops intake and releases connections. */
  stop(): Promise<void>;
  /** Delivers one reply. */
  send(target: DeliveryTarget, message: OutboundMessage): Promise<void>;
  /** Post-and-edit calls for replies shown while they are written (SPEC §16); absent: replies are sent whole. */
  readonly live?: LiveReplyCalls;
  /** Shows a typing indicator once (the gateway repeats it while a turn runs). */
  typing?(target: DeliveryTarget): Promise<void>;
  /**
   * How long one `typing` call shows on this platform (ms; Telegram 5 s, Discord about 10 s). The gateway
   * refreshes the indicator a little before that; unset: 5 s.
   */
  readonly typingLapseMs?: number;
  /**
   * Puts a reaction on a received message (the ack reaction, SPEC §16). `messageId` is the message's
   * `InboundMessage.id`; `emoji` a Unicode emoji (Slack also takes a `:name:`). Tried again as the channel's
   * deliveries are, up to `delivery.maxAttempts`, never more; rejects when the platform refused it (an emoji it
   * does not allow, a message gone, no permission).
   */
  react?(target: DeliveryTarget, messageId: string, emoji: string): Promise<void>;
  /**
   * Opens the bytes of an attachment of a message this channel received, from the platform's own file API only
   * (Telegram `getFile` + file URL, Discord's attachment URL, Slack `url_private` with the bot token; SPEC §15).
   * Rejects with a `MediaFetchError` when the platform refuses or the file is over `maxBytes` as announced.
   * Absent: the channel's attachments are listed, not fetched.
   */
  fetchMedia?(attachment: Attachment, options: { signal: AbortSignal; maxBytes: number }): Promise<MediaDownload>;
  /** HTTP routes this channel serves (webhook mode). */
  routes?(): HttpRoute[];
  /** The chat commands, for platforms that register them (Telegram `setMyCommands`). */
  registerCommands?(commands: readonly { command: string; description: string }[]): Promise<void>;
}
