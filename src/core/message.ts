/** The channels Switchboard knows (SPEC §1). */
export type ChannelId = 'telegram' | 'discord' | 'slack' | 'webchat' | 'cli' | 'api' | 'internal';

export const CHANNEL_IDS: readonly ChannelId[] = ['telegram', 'discord', 'slack', 'webchat', 'cli', 'api', 'internal'];

/** `direct` = a one-to-one chat; `group` = Telegram groups; `channel` = Discord guild channels, Slack channels. */
export type ChatType = 'direct' | 'group' | 'channel';

/** A file or media item attached to a message (SPEC §15). The runtime fetches it and records what it became. */
export interface Attachment {
  type: 'photo' | 'document' | 'voice' | 'audio' | 'video' | 'sticker' | 'file' | 'image' | 'other';
  /** Platform file id (Telegram `file_id`, Discord attachment id, Slack file id), or `media:<sha256>` when already stored. */
  fileId: string;
  /** The platform's own download URL, when its event carries one (Discord attachment URL, Slack `url_private`). Never a URL from message text. */
  url?: string;
  name?: string;
  mimeType?: string;
  size?: number;
  /** Voice notes and audio: length in seconds, when the platform says. */
  durationSeconds?: number;
  width?: number;
  height?: number;
  /** Set when the bytes are already in the media store (web chat uploads, API data URLs). */
  sha256?: string;
  /** An image given by URL to pass through to the model unfetched (`image_url` parts of `/v1/chat/completions`). */
  passThroughUrl?: string;
}

/** What an attachment became for the model; the transcript's user entry keeps one per attachment (SPEC §15). */
export interface MediaRecord {
  kind: 'image' | 'voice' | 'audio' | 'video' | 'document' | 'file';
  name?: string;
  mime: string;
  /** Bytes (as fetched, or as the platform announced when not fetched). */
  size: number;
  /** Of the fetched bytes, in the media store; absent when nothing was stored (too large, failed, passed through). */
  sha256?: string;
  /**
   * `image`: shown to the model as an image part (when the model sees); `transcript`: a voice note's text became
   * the message's text; `text`: a document's text was inlined; `line`: only {@link MediaRecord.line} was given.
   */
  as: 'image' | 'transcript' | 'text' | 'line';
  /** The one-line description the model gets instead of the item (vision off, after a compaction, a failure). */
  line: string;
  width?: number;
  height?: number;
  durationSeconds?: number;
  /** Images: the downscaled image the model sees, in the media store. */
  modelSha256?: string;
  modelMime?: string;
  /** Images: pixels of the downscaled image. */
  modelWidth?: number;
  modelHeight?: number;
  /** An image passed through by URL (`/v1/chat/completions`), never fetched by the gateway. */
  url?: string;
  /** Why the item was not given as itself: `too_large`, `download_failed`, `timeout`, `undecodable`, `unsupported`, `no_transcription`. */
  problem?: string;
}

/** A file a reply carries: uploaded natively by the channel (SPEC §15 `send_file`). */
export interface OutboundFile {
  /** Absolute path of a readable file (checked by whoever made the reply: inside the workspace, within `media.maxBytes`). */
  path: string;
  name: string;
  mime: string;
  size: number;
  /** Its media store copy, when stored (the web chat links it). */
  sha256?: string;
}

/** Bytes of an attachment as a channel fetched them from its platform (SPEC §15). */
export interface MediaDownload {
  /** The body; read it to the end or abort the signal given to `fetchMedia`. */
  body: AsyncIterable<Uint8Array>;
  /** Content length when known (a download announcing more than the limit is not read). */
  size?: number;
  /** The platform's content type, if any (not trusted: the runtime sniffs). */
  mime?: string;
}

/** Who sent a message. */
export interface Sender {
  id: string;
  name?: string;
  username?: string;
  isBot?: boolean;
}

/**
 * One platform event, normalized. Channels build it in their pure `normalize.ts`; everything after the
 * channel boundary sees only this.
 */
export interface InboundMessage {
  /** Platform message id, unique within (channel, accountId). Used for redelivery dedupe. */
  id: string;
  /** Optional delivery id when the platform redelivers under its own id (Telegram update_id, Slack event_id). */
  deliveryId?: string;
  channel: ChannelId;
  accountId: string;
  chatType: ChatType;
  /** Platform id of the chat the reply goes to (DM channel, group, guild channel). */
  chatId: string;
  /** For `direct`: the person. For groups: the sender's id. */
  peerId: string;
  /** Group or channel id, for `group` / `channel` chat types. */
  groupId?: string;
  /** Enclosing spaces a group allowlist may name (Discord guild id, Slack team id). */
  containerIds?: string[];
  /** Thread / topic id when the message is inside one. */
  threadId?: string;
  /** `topic` for Telegram forum topics (key segment `:topic:`), else `thread`. */
  threadKind?: 'thread' | 'topic';
  sender: Sender;
  text: string;
  attachments: Attachment[];
  /** What each attachment became, set by the runtime's media intake before the turn (SPEC §15). */
  media?: MediaRecord[];
  /** What the media intake adds to the message's text for the model, in order: lines and inlined documents (not images). */
  mediaNotes?: string[];
  replyTo?: { id: string; text?: string; fromBot?: boolean };
  /** True when the bot was @mentioned, replied to, or addressed with a command. */
  mentionsBot: boolean;
  /** Epoch milliseconds. */
  receivedAt: number;
  /** Set by the HTTP API from X-Request-Id / X-Trace-Id; otherwise the gateway generates one. */
  correlationId?: string;
  /** Agent that should answer; defaults to the first configured agent. */
  agentId?: string;
  /** Forces the session key's DM scope (the OpenAI-compatible API always uses per-channel-peer). */
  dmScope?: 'main' | 'per-peer' | 'per-channel-peer' | 'per-account-channel-peer';
  /** When true the turn is not persisted as a chat (one-off API calls). */
  ephemeral?: boolean;
  /** The platform event, for logs only; never persisted. */
  raw?: unknown;
  /** Whom `limits.perSender` counts this message against, when not `<channel>:<peerId>` (the HTTP API's client). */
  rateLimitKey?: string;
  /** Set on channel `internal`: which session the message is for, why, and where its answer goes. */
  internal?: InternalRoute;
}

/** Why an `internal` message exists (SPEC §11). */
export type InternalKind =
  | 'spawn' | 'yield' | 'send' | 'subagent_result' | 'background_auto_continue' | 'background_auto_resume' | 'job' | 'heartbeat' | 'hook';

/** Routing of a message on channel `internal`: session tools, sub-agent results and background runs. */
export interface InternalRoute {
  kind: InternalKind;
  /** The session the message goes to (internal messages name their key instead of building one). */
  sessionKey: string;
  /** The session whose turn made this message. */
  fromKey?: string;
  /** A spawned child's parent (its entry's `parentKey`). */
  parentKey?: string;
  /** Correlation id of the turn that made this message; the target's ledger records carry it. */
  parentCorrelationId?: string;
  /** Where the answer goes, when it should reach a chat (a platform target); else it is not delivered. */
  deliverTo?: DeliveryTarget;
  /** Kind `job`: the job this run is for (its ledger records carry it, SPEC §17). */
  jobId?: string;
  /** Input + output tokens this run may use (a job's `tokenBudget`). */
  runTokenBudget?: number;
  /** Kind `heartbeat`: an answer of `HEARTBEAT_OK` or nothing is not delivered; the model the turn uses. */
  model?: string;
  /** When this message's run ends, its final answer is queued into that session as a sub-agent result. */
  reportTo?: { sessionKey: string; label: string; deliverTo?: DeliveryTarget; correlationId: string };
}

/** Where a reply goes. Built by the gateway from the inbound message. */
export interface DeliveryTarget {
  channel: ChannelId;
  accountId: string;
  chatId: string;
  chatType: ChatType;
  threadId?: string;
  /** Platform id of the message being answered. */
  replyToId?: string;
  peerId?: string;
}

/** What the agent sends back. `text` is markdown; each channel renders it to its own markup. */
export interface OutboundMessage {
  text: string;
  /** One short line shown before the text (automatic reset notices). */
  notice?: string;
  replyTo?: string;
  threadId?: string;
  attachments?: Attachment[];
  /** Files uploaded natively after the text (the `send_file` tool). */
  files?: OutboundFile[];
  /** `error` replies are apologies; channels may style them. */
  kind?: 'reply' | 'command' | 'error' | 'notice' | 'pairing';
  /**
   * Stable across a replay: `<delivery key>:<reply index>` for the replies of a turn answering a platform
   * message (set by the gateway), so that a channel can make a resend of the same reply idempotent (Discord's
   * nonce) while two equal replies, or equal replies to different messages, stay distinct. Absent otherwise.
   */
  idempotencyKey?: string;
}

/** The full text of an outbound message, notice first. */
export function outboundText(message: OutboundMessage): string {
  return message.notice ? `${message.notice}\n\n${message.text}` : message.text;
}

/** Builds the reply target of an inbound message. */
export function targetOf(message: InboundMessage): DeliveryTarget {
  return {
    channel: message.channel,
    accountId: message.accountId,
    chatId: message.chatId,
    chatType: message.chatType,
    threadId: message.threadId,
    replyToId: message.id,
    peerId: message.peerId,
  };
}
