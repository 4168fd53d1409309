import { randomUUID } from 'node:crypto';
import { App, webApi, type AllMiddlewareArgs, type Logger as BoltLogger } from '@slack/bolt';
import type { SlackAccountConfig } from '../../src/config/resolved.ts';
import type { ChannelAdapter, ChannelStatus, HttpRoute, InboundSink } from '../../src/core/channel-adapter.ts';
import { ChannelError, MediaFetchError, type SwitchboardError } from '../../src/core/errors.ts';
import { runWithLogContext } from '../../src/core/log-context.ts';
import { TIMED_OUT, withDeadline } from '../../src/core/deadline.ts';
import type { Logger } from '../../src/core/logger.ts';
import type { Attachment, DeliveryTarget, MediaDownload, OutboundMessage } from '../../src/core/message.ts';
import type { ChannelFactoryContext } from '../types.ts';
import { checkBotToken, describeSlackError, isSlackAuthError } from './auth.ts';
import { boltLogger } from './bolt-logger.ts';
import { BoundedMap } from './bounded-map.ts';
import { DELIVERY_PROPERTY, SlackHttpReceiver, type DeliveryOutcome, type ReceiverTimers } from './http-receiver.ts';
import { normalizeSlackEvent, tsOfMessageId, type SlackBotIdentity, type SlackEnvelope, type SlackMessageEvent } from './normalize.ts';
import { renderSlackChunks } from './render.ts';
import { fetchSlackMedia } from './media.ts';
import { imageMessage, outboundParts, type SlackImageBlock } from './send-media.ts';
import { slackLiveCalls } from './live.ts';
import { isAlreadyReacted, slackReactionName } from './react.ts';
import { SlackSocket } from './socket.ts';
import { slackRetryVerdict } from './send-retry.ts';
import { DEFAULT_DELIVERY_RETRY, retryDelivery } from '../../src/core/delivery-retry.ts';

/** Options of {@link createSlackChannel}. */
export interface SlackChannelOptions extends ChannelFactoryContext {
  account: SlackAccountConfig;
  /** Bound on start-up (auth.test, then the Socket Mode connection), default 10 s. */
  startTimeoutMs?: number;
  /** HTTP mode: the longest an event request waits for the event to be taken before answering 503 (default 2.5 s). */
  ackDeadlineMs?: number;
  /** HTTP mode: timers of that deadline (tests pass their own). */
  timers?: ReceiverTimers;
}

/** The Slack channel of one account (one workspace app). */
export function createSlackChannel(options: SlackChannelOptions): ChannelAdapter {
  return new SlackChannel(options);
}

/**
 * Rate-limited calls wait for `Retry-After` and are retried (web-api pauses its queue for that long);
 * other failures are retried briefly, so a send never hangs for long.
 */
const RETRY_CONFIG = { retries: 3, factor: 2, minTimeout: 250, maxTimeout: 2000 };

/** A thread the bot has answered in: replies there count as addressed to it. */
interface BotThread {
  lastReply?: string;
  seeded: boolean;
}

type ListenerArgs = { event: unknown; body: unknown; context: AllMiddlewareArgs['context']; client: webApi.WebClient };

/**
 * Slack on @slack/bolt: Socket Mode by default, or the Events API on `POST /webhooks/slack/<accountId>`
 * of the gateway's own server (mode `http`). Slack has no typing indicator for bots outside its
 * assistant threads, so this adapter has no `typing`.
 */
class SlackChannel implements ChannelAdapter {
  readonly id = 'slack' as const;
  readonly accountId: string;
  status: ChannelStatus = 'stopped';
  statusDetail?: string;
  /** The error of the last failure, with its code (the supervisor gives up on a definite one). */
  lastFailure?: ChannelError;
  private readonly options: SlackChannelOptions;
  private readonly account: SlackAccountConfig;
  private readonly logger: Logger;
  private readonly bolt: BoltLogger;
  private readonly clientOptions: webApi.WebClientOptions;
  private readonly httpReceiver?: SlackHttpReceiver;
  /**
   * Event ids being or recently handed over, each with whether it was taken: the gateway dedupes durably;
   * this lets a retry racing the original wait for it (and go in itself when the original failed).
   */
  private readonly recentEvents = new BoundedMap<string, Promise<boolean>>(2000);
  private readonly botThreads = new BoundedMap<string, BotThread>(5000);
  private readonly userNames = new BoundedMap<string, string | null>(5000);
  private app?: App;
  /**
   * The client of deliveries: no retries or rate-limit waits of its own, so that {@link withRetry} decides
   * (with `delivery.maxAttempts`) what Slack did not take and tries it again.
   */
  private readonly sendClient: webApi.WebClient;
  private socket?: SlackSocket;
  /** The bot's workspace (auth.test), the `recipient_team_id` of a native stream. */
  private teamId?: string;

  constructor(options: SlackChannelOptions) {
    this.options = options;
    this.account = options.account;
    this.accountId = options.account.accountId;
    this.logger = options.logger.child({ channel: 'slack', accountId: this.accountId });
    this.bolt = boltLogger(this.logger.child({ component: 'bolt' }));
    this.clientOptions = {
      ...(this.account.apiUrl ? { slackApiUrl: this.account.apiUrl } : {}),
      retryConfig: RETRY_CONFIG,
      rejectRateLimitedCalls: false,
      timeout: 30_000,
      logger: this.bolt,
    };
    this.sendClient = new webApi.WebClient(this.account.botToken, { ...this.clientOptions, retryConfig: { retries: 0 }, rejectRateLimitedCalls: true });
    if (this.account.mode === 'http') {
      this.httpReceiver = new SlackHttpReceiver({ signingSecret: this.account.signingSecret, clock: options.clock, logger: this.logger, ackDeadlineMs: options.ackDeadlineMs, timers: options.timers });
    }
  }

  async start(sink: InboundSink): Promise<void> {
    this.status = 'starting';
    this.statusDetail = undefined;
    this.lastFailure = undefined;
    this.checkConfig();
    const timeoutMs = this.options.startTimeoutMs ?? 10_000;
    let bot: SlackBotIdentity;
    try {
      bot = await checkBotToken({ token: this.account.botToken, apiUrl: this.account.apiUrl, accountId: this.accountId, timeoutMs, logger: this.bolt });
    } catch (error) {
      return this.fail(error as ChannelError);
    }
    this.teamId = bot.teamId;
    const app = this.createApp(sink, bot);
    this.app = app;
    try {
      await withTimeout<unknown>(this.socket ? this.socket.start() : app.start(), timeoutMs);
    } catch (error) {
      await this.socket?.stop().catch(() => undefined);
      this.app = undefined;
      const detail = error === TIMEOUT ? `no connection within ${timeoutMs / 1000} s` : describeSlackError(error);
      // apps.connections.open refusing the app token is definite (SLACK_AUTH_FAILED: not retried); anything else may pass.
      const code = isSlackAuthError(error) ? 'SLACK_AUTH_FAILED' : 'SLACK_SOCKET_FAILED';
      return this.fail(new ChannelError(code, `Slack account "${this.accountId}": Socket Mode did not connect (${detail}); check SLACK_APP_TOKEN and that Socket Mode is on for the app.`, error));
    }
    this.status = 'running';
    this.logger.info({ mode: this.account.mode, botUserId: bot.userId, teamId: bot.teamId }, 'slack: connected');
  }

  async stop(): Promise<void> {
    const app = this.app;
    this.app = undefined;
    // A failure stays visible (the supervisor stops a failed channel before deciding whether to retry).
    if (this.status !== 'failed') this.status = 'stopped';
    if (this.socket) await this.socket.stop().catch((err: unknown) => this.logger.warn({ err }, 'slack: Socket Mode did not close cleanly'));
    else if (app) await app.stop().catch((err: unknown) => this.logger.warn({ err }, 'slack: stop failed'));
    this.socket = undefined;
  }

  /** Replies shown while they are written (SPEC §16): native streaming in threads where offered, else chat.postMessage, then chat.update. */
  readonly live = slackLiveCalls(() => {
    if (!this.app) throw new ChannelError('SLACK_NOT_RUNNING', `Slack account "${this.accountId}" is not running; the reply was not sent.`);
    return this.sendClient;
  }, (what, call) => this.withRetry(what, call), { teamId: () => this.teamId, logger: () => this.logger });

  /**
   * Renders to mrkdwn and posts each chunk; in channels, into the thread of the message answered. A markdown image
   * alone on its line goes as an image block in its place; the message's `files` are uploaded after the text
   * (`files.uploadV2`). Each call is tried again while Slack did not take it.
   */
  async send(target: DeliveryTarget, message: OutboundMessage): Promise<void> {
    const client = this.app && this.sendClient;
    if (!client) throw new ChannelError('SLACK_NOT_RUNNING', `Slack account "${this.accountId}" is not running; the reply was not sent.`);
    const threadTs = message.threadId ?? target.threadId
      ?? (target.chatType === 'direct' ? undefined : tsOfMessageId(message.replyTo ?? target.replyToId));
    const thread = threadTs ? { thread_ts: threadTs } : {};
    const post = async (what: string, args: { text: string; blocks?: SlackImageBlock[] }) => {
      try {
        await this.withRetry('chat.postMessage', () => client.chat.postMessage({ channel: target.chatId, ...args, ...thread }));
      } catch (error) {
        throw new ChannelError('SLACK_SEND_FAILED', `Slack chat.postMessage (${what}) to ${target.chatId} failed (${describeSlackError(error)}).`, error);
      }
    };
    // Images alone on their line go as image blocks, in order with the text around them (SPEC §15).
    let posted = 0;
    for (const part of outboundParts(message)) {
      const messages = part.kind === 'image' ? [imageMessage(part)] : renderSlackChunks(part.text).map((text) => ({ text }));
      for (const args of messages) await post(part.kind, args);
      posted += messages.length;
    }
    for (const file of message.files ?? []) {
      try {
        await this.withRetry('files.uploadV2', () => client.filesUploadV2({ channel_id: target.chatId, ...thread, file: file.path, filename: file.name }));
      } catch (error) {
        throw new ChannelError('SLACK_UPLOAD_FAILED', `Slack files.uploadV2 of ${file.name} to ${target.chatId} failed (${describeSlackError(error)}; the app needs the files:write scope).`, error);
      }
      posted++;
    }
    if (threadTs && target.chatType !== 'direct' && posted) {
      const key = `${target.chatId}:${threadTs}`;
      this.botThreads.set(key, { lastReply: message.text, seeded: this.botThreads.get(key)?.seeded ?? false });
    }
  }

  /** Opens a file's bytes from its `url_private` with the bot token, Slack's file host only (SPEC §15; see {@link fetchSlackMedia}). */
  async fetchMedia(attachment: Attachment, options: { signal: AbortSignal; maxBytes: number }): Promise<MediaDownload> {
    // A file shared from another workspace comes without its URL (`file_access: check_file_info`): files.info has it.
    const url = attachment.url ?? await this.sendClient.files.info({ file: attachment.fileId }).then(
      (r) => (typeof r.file?.url_private === 'string' ? r.file.url_private : undefined),
      (error: unknown) => { throw new MediaFetchError('download_failed', `Slack files.info for ${attachment.fileId} failed (${describeSlackError(error)}).`); },
    );
    return fetchSlackMedia(this.account, { ...attachment, ...(url ? { url } : {}) }, options);
  }

  /** The ack reaction (`reactions.add`, by name: `👀` is `eyes`); on the message already is not an error. */
  async react(target: DeliveryTarget, messageId: string, emoji: string): Promise<void> {
    const client = this.app && this.sendClient;
    if (!client) throw new ChannelError('SLACK_NOT_RUNNING', `Slack account "${this.accountId}" is not running; the reaction was not added.`);
    const timestamp = tsOfMessageId(messageId);
    if (!timestamp) throw new ChannelError('SLACK_REACTION_INVALID', `"${messageId}" is not a Slack message id.`);
    const name = slackReactionName(emoji);
    try {
      await this.withRetry('reactions.add', () => client.reactions.add({ channel: target.chatId, timestamp, name }));
    } catch (error) {
      if (isAlreadyReacted(error)) return;
      throw new ChannelError('SLACK_REACTION_FAILED', `Slack reactions.add on ${target.chatId} failed (${describeSlackError(error)}).`, error);
    }
  }

  routes(): HttpRoute[] {
    const receiver = this.httpReceiver;
    if (!receiver) return [];
    return [{ method: 'POST', path: `/webhooks/slack/${this.accountId}`, handle: (request, _params, context) => receiver.handle(request, context.correlationId) }];
  }

  private checkConfig(): void {
    const { account, accountId: id } = this;
    if (!account.botToken) {
      this.fail(new ChannelError('SLACK_CONFIG', `Slack account "${id}": SLACK_BOT_TOKEN is not set; create a Slack app, install it and put its bot token (xoxb-…) in .env.`));
    }
    if (account.mode === 'socket' && !account.appToken) {
      this.fail(new ChannelError('SLACK_CONFIG', `Slack account "${id}": Socket Mode needs SLACK_APP_TOKEN (an xapp-… token with connections:write); or set channels.slack.mode to "http" with SLACK_SIGNING_SECRET.`));
    }
    if (account.mode === 'http' && !account.signingSecret) {
      this.fail(new ChannelError('SLACK_CONFIG', `Slack account "${id}": HTTP mode needs SLACK_SIGNING_SECRET (Basic Information → App Credentials) to verify Slack's requests.`));
    }
  }

  private fail(error: ChannelError): never {
    this.status = 'failed';
    this.statusDetail = error.message;
    this.lastFailure = error;
    throw error;
  }

  /** The bolt App, with the identity from our own auth.test so bolt never calls it (no unbounded retries). */
  private createApp(sink: InboundSink, bot: SlackBotIdentity): App {
    if (this.account.mode === 'socket') {
      this.socket = new SlackSocket({
        appToken: this.account.appToken, clientOptions: this.clientOptions, boltLogger: this.bolt, logger: this.logger,
        events: {
          // Not connected while the socket is down: `/readyz` answers 503 with the reason until it is back.
          disconnected: (reason) => {
            if (this.status !== 'running' && this.status !== 'starting') return;
            this.status = 'starting';
            this.statusDetail = `Slack account "${this.accountId}": ${reason}; reconnecting`;
          },
          reconnected: () => {
            if (this.status !== 'starting' || !this.app) return;
            this.status = 'running';
            this.statusDetail = undefined;
          },
          authFailed: (error) => {
            const failure = new ChannelError('SLACK_AUTH_FAILED', `Slack account "${this.accountId}": Socket Mode could not reconnect, the app token was refused (${describeSlackError(error)}); check SLACK_APP_TOKEN (xapp-… with connections:write), then restart.`, error);
            this.status = 'failed';
            this.statusDetail = failure.message;
            this.lastFailure = failure;
          },
        },
      });
    }
    const app = new App({
      token: this.account.botToken,
      botId: bot.botId ?? '',
      botUserId: bot.userId,
      tokenVerificationEnabled: false,
      receiver: this.socket?.receiver ?? this.httpReceiver,
      clientOptions: this.clientOptions,
      logger: this.bolt,
      ignoreSelf: true,
      convoStore: false,
    });
    const listener = (args: ListenerArgs) => this.onEvent(sink, bot, args);
    app.event('message', listener);
    app.event('app_mention', listener);
    app.error(async (error) => { this.logger.error({ err: error }, 'slack: listener failed'); });
    return app;
  }

  private onEvent(sink: InboundSink, bot: SlackBotIdentity, args: ListenerArgs): Promise<void> {
    const eventId = (args.body as SlackEnvelope | undefined)?.event_id;
    const correlationId = randomUUID();
    return runWithLogContext({ channel: 'slack', accountId: this.accountId, correlationId }, async () => {
      try {
        await this.takeEvent(sink, bot, args, correlationId);
      } catch (error) {
        // A malformed event that got past the checks: logged, answered 200 (a retry would not fix it).
        this.logger.error({ err: error, eventId, correlationId }, 'slack: event could not be handled; the channel goes on');
      }
    });
  }

  private async takeEvent(sink: InboundSink, bot: SlackBotIdentity, args: ListenerArgs, correlationId: string): Promise<void> {
    const envelope = args.body as SlackEnvelope;
    const event = args.event as SlackMessageEvent;
    const eventId = typeof envelope.event_id === 'string' ? envelope.event_id : undefined;
    const earlier = eventId ? this.recentEvents.get(eventId) : undefined;
    // A copy of an event taken (or being taken) here: answered once the original is; a failed original's retry goes in.
    if (earlier && await earlier) return;
    const threadKey = event.thread_ts ? `${event.channel}:${event.thread_ts}` : undefined;
    const thread = threadKey ? this.botThreads.get(threadKey) : undefined;
    const result = normalizeSlackEvent({
      event, envelope, bot, accountId: this.accountId, receivedAt: this.options.clock.now(),
      ...(thread ? { botThread: thread.seeded ? {} : { lastReply: thread.lastReply } } : {}),
    });
    if (result.kind === 'ignored') {
      this.logger.debug({ eventId, reason: result.reason }, 'slack: event ignored');
      return;
    }
    const message = { ...result.message, correlationId };
    let taken: (ok: boolean) => void = () => undefined;
    if (eventId) this.recentEvents.set(eventId, new Promise<boolean>((resolve) => { taken = resolve; }));
    if (thread && threadKey) this.botThreads.set(threadKey, { ...thread, seeded: true });
    const name = message.sender.name ? undefined : await this.userName(args.client, message.sender.id);
    if (name) message.sender.name = name;
    try {
      const submission = await sink(message);
      taken(true);
      this.logger.debug({ eventId, status: submission.status, sessionKey: submission.sessionKey, correlationId: submission.correlationId }, 'slack: event submitted');
    } catch (error) {
      taken(false);
      if (eventId) this.recentEvents.delete(eventId);
      const outcome = args.context[DELIVERY_PROPERTY] as DeliveryOutcome | undefined;
      const shuttingDown = (error as SwitchboardError).code === 'SHUTTING_DOWN';
      // Only a real shutdown is answered 503; a failure to take the event is a 500 (HTTP mode; Slack retries both).
      if (outcome) outcome.rejected = shuttingDown ? 'shutting-down' : 'failed';
      if (shuttingDown) this.logger.info({ eventId }, 'slack: event refused while shutting down');
      else this.logger.error({ err: error, eventId }, 'slack: event could not be submitted');
    }
  }

  /** The sender's display name (users.info, cached; waits at most 1.5 s; none when Slack has none). */
  /** One Web API call of a delivery, tried again while Slack did not take it (`delivery.maxAttempts`). */
  private withRetry<T>(what: string, call: () => Promise<T>): Promise<T> {
    return retryDelivery(what, call, slackRetryVerdict, this.options.delivery ?? DEFAULT_DELIVERY_RETRY, {
      onRetry: (notice) => this.logger.warn({ call: what, attempt: notice.attempt, attemptsLeft: notice.attemptsLeft, reason: notice.reason }, 'Slack did not take a delivery; trying again'),
    });
  }

  private async userName(client: webApi.WebClient, userId: string): Promise<string | undefined> {
    if (this.userNames.has(userId)) return this.userNames.get(userId) ?? undefined;
    const lookup = client.users.info({ user: userId }).then(
      (r) => r.user?.profile?.display_name || r.user?.profile?.real_name || r.user?.real_name || r.user?.name || null,
      () => null,
    );
    const name = await withDeadline(lookup, 1500);
    if (name === TIMED_OUT) return undefined;
    this.userNames.set(userId, name);
    return name ?? undefined;
  }
}

/** The rejection of {@link withTimeout} (one instance, told apart by identity). */
const TIMEOUT = new Error('timeout');

async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(TIMEOUT), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}
