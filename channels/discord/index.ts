import { randomUUID } from 'node:crypto';
import { Client, Events, GatewayIntentBits, Partials, Routes, type Message, type SendableChannels } from 'discord.js';
import type { ChannelAdapter, ChannelStatus, InboundSink } from '../../src/core/channel-adapter.ts';
import { ChannelError } from '../../src/core/errors.ts';
import { runWithLogContext, type LogContext } from '../../src/core/log-context.ts';
import type { Logger } from '../../src/core/logger.ts';
import type { Attachment, DeliveryTarget, MediaDownload, OutboundMessage } from '../../src/core/message.ts';
import type { DiscordAccountConfig } from '../../src/config/resolved.ts';
import type { ChannelFactoryContext } from '../types.ts';
import { botRoleIdsOf, factsOf } from './facts.ts';
import { normalizeDiscordMessage } from './normalize.ts';
import { discordRetryVerdict } from './send-retry.ts';
import { DEFAULT_DELIVERY_RETRY, retryDelivery } from '../../src/core/delivery-retry.ts';
import { guardDispatches } from './packet-guard.ts';
import { discordLiveCalls } from './live.ts';
import { discordReactionPath } from './react.ts';
import { ShardLeases } from './shard-leases.ts';
import { destroyClient, safeString } from './client-teardown.ts';
import { fetchDiscordMedia } from './media.ts';
import { ALLOWED_MENTIONS, sendDiscordReply } from './send.ts';
import { DiscordStartTimeout, startError, tokenSetting } from './start-error.ts';

/** Options of {@link createDiscordChannel}. */
export interface DiscordChannelOptions extends ChannelFactoryContext {
  account: DiscordAccountConfig;
  /** How long `start()` waits for the gateway to be ready before it gives up (default 30 s). */
  startTimeoutMs?: number;
  /**
   * Restarts of a client whose caches may be corrupted (discord.js threw while handling an event): the
   * first after `baseMs` (default 1 s), doubling with each restart within `windowMs` (default 10 min) of
   * the previous one, at most `maxMs` (default 5 min).
   */
  restartBackoff?: { baseMs?: number; maxMs?: number; windowMs?: number };
  /** Timers for the restarts (tests pass their own). */
  timers?: { setTimeout(fn: () => void, ms: number): unknown; clearTimeout(handle: unknown): void };
}

const realTimers = {
  setTimeout: (fn: () => void, ms: number): unknown => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle: unknown) => clearTimeout(handle as NodeJS.Timeout),
};

const RECONNECTING = 'reconnecting to the Discord gateway';

/**
 * The Discord channel of one account (discord.js Gateway with the MessageContent intent): DMs, guild
 * channels and threads in; replies rendered and split to 2000 characters out. In cluster mode the
 * shards are held by one replica each and taken over (see {@link ShardLeases}); replies go over REST.
 */
export function createDiscordChannel(options: DiscordChannelOptions): ChannelAdapter {
  return new DiscordChannel(options);
}

class DiscordChannel implements ChannelAdapter {
  readonly id = 'discord' as const;
  readonly accountId: string;
  /** Typing shows for about 10 s (or until the bot's next message). */
  readonly typingLapseMs = 10_000;
  private state: ChannelStatus = 'stopped';
  statusDetail?: string;
  /** The error behind a failure after start-up (the gateway closed for good), with its code for the supervisor. */
  lastFailure?: ChannelError;
  /** Cluster mode: the shard leases; `client` is then a REST-only client (never logged in to the gateway). */
  private shards?: ShardLeases;
  private readonly options: DiscordChannelOptions;
  private readonly logger: Logger;
  private client?: Client;
  /** The replacement client while a restart connects (its messages are taken too; the journal dedupes). */
  private nextClient?: Client;
  private sink?: InboundSink;
  /** Messages are handed to the gateway one at a time, in arrival order. */
  private intake: Promise<void> = Promise.resolve();
  private readonly context: LogContext;
  private readonly timers: NonNullable<DiscordChannelOptions['timers']>;
  private restartTimer?: unknown;
  private restarting?: Promise<void>;
  /** Restarts in a row (each within the window of the previous one), for the backoff. */
  private restarts = 0;
  private lastRestartAt = 0;
  /** Replaced clients being destroyed. */
  private readonly retiring = new Set<Promise<void>>();

  constructor(options: DiscordChannelOptions) {
    this.options = options;
    this.accountId = options.account.accountId;
    this.logger = options.logger.child({ channel: 'discord', accountId: this.accountId });
    this.context = { channel: 'discord', accountId: this.accountId };
    this.timers = options.timers ?? realTimers;
  }

  get status(): ChannelStatus {
    if (this.shards && this.state === 'running') return this.shards.held > 0 ? 'running' : 'standby';
    // While discord.js reconnects the channel is not connected: `/readyz` and the dashboard say so.
    if (this.state === 'running' && this.statusDetail === RECONNECTING) return 'starting';
    return this.state;
  }

  async start(sink: InboundSink): Promise<void> {
    const { account } = this.options;
    if (!account.token) {
      this.fail('no token');
      throw new ChannelError('DISCORD_TOKEN_MISSING', `Discord is enabled but has no bot token: set ${tokenSetting(this.accountId)}.`);
    }
    this.sink = sink;
    this.state = 'starting';
    this.statusDetail = undefined;
    this.lastFailure = undefined;
    if (this.options.cluster) return this.startSharded();
    let client: Client;
    try {
      client = await this.connect((c) => { this.client = c; });
    } catch (failure) {
      this.client = undefined;
      this.fail((failure as Error).message);
      throw failure;
    }
    this.state = 'running';
    this.logger.info({ botUserId: client.user?.id, botName: client.user?.username, guilds: client.guilds.cache.size }, 'discord connected');
  }

  /** Cluster mode: a REST client (token checked) for replies, and a campaign for each shard. */
  private async startSharded(): Promise<void> {
    const { account } = this.options;
    const rest = new Client({ intents: [], ...(account.apiBase ? { rest: { api: account.apiBase } } : {}) });
    rest.rest.setToken(account.token);
    const ms = this.options.startTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        rest.rest.get(Routes.user('@me')),
        new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new DiscordStartTimeout(ms)), ms); }),
      ]);
      this.client = rest;
      this.shards = new ShardLeases({
        cluster: this.options.cluster!, accountId: this.accountId, shardCount: account.shardCount ?? 1,
        clock: this.options.clock, logger: this.logger,
        host: {
          connectShard: (shard, created) => this.connect(created, shard),
          destroy: (client) => destroyClient(client),
          enqueue: (work) => { this.intake = this.intake.then(work); },
          handle: (message, client) => this.receive(message, client),
        },
      });
      await this.shards.start();
    } catch (failure) {
      this.client = undefined;
      this.shards = undefined;
      const error = failure instanceof ChannelError ? failure : startError(failure, account);
      this.fail(error.message);
      throw error;
    } finally {
      clearTimeout(timer);
    }
    this.state = 'running';
    this.logger.info({ shardCount: account.shardCount ?? 1, held: this.shards.held }, this.shards.held ? 'discord connected (cluster mode)' : 'discord standing by (another replica holds the shards)');
  }

  async stop(): Promise<void> {
    const shards = this.shards;
    this.shards = undefined;
    await shards?.stop();
    const client = this.client;
    const next = this.nextClient;
    this.client = undefined;
    this.nextClient = undefined;
    this.sink = undefined;
    this.state = 'stopped';
    if (this.restartTimer !== undefined) this.timers.clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    await this.intake;
    if (next) await destroyClient(next);
    if (client) await destroyClient(client);
    await this.restarting;
    await Promise.allSettled([...this.retiring]);
  }

  /**
   * A new client, logged in and ready within the start timeout; `created` sees it before it logs in (so
   * that its first messages are taken). Rejects with a ChannelError (the client destroyed) otherwise.
   */
  private async connect(created: (client: Client) => void, shard?: number): Promise<Client> {
    const { account } = this.options;
    const client = this.createClient(shard);
    created(client);
    const ready = new Promise<void>((resolve) => client.once(Events.ClientReady, () => resolve()));
    // The shards' sockets and timers are created here: what escapes them carries the channel's context.
    const loggedIn = runWithLogContext(this.context, () => client.login(account.token)).then(() => ready);
    loggedIn.catch(() => undefined); // A late rejection after a timeout is not unhandled.
    const ms = this.options.startTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new DiscordStartTimeout(ms)), ms); });
    try {
      await Promise.race([loggedIn, timeout]);
      return client;
    } catch (error) {
      await destroyClient(client);
      throw startError(error, account);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * discord.js threw while handling an event of `client`: its caches may be half updated. A new client is
   * connected (with backoff, see `restartBackoff`) and takes over; the old one serves until then.
   */
  private scheduleRestart(client: Client, reason: string): void {
    if (client !== this.client || !this.sink || this.restartTimer !== undefined || this.restarting) return;
    const { baseMs = 1000, maxMs = 300_000, windowMs = 600_000 } = this.options.restartBackoff ?? {};
    const now = this.options.clock.now();
    if (now - this.lastRestartAt > windowMs) this.restarts = 0;
    const delay = Math.min(maxMs, baseMs * 2 ** Math.min(this.restarts, 30));
    this.statusDetail = `restarting the Discord client in ${Math.round(delay / 100) / 10} s after an internal error (${reason})`;
    this.logger.warn({ retryInMs: delay, reason }, 'discord: the client may be inconsistent after an internal error; restarting it');
    this.restartTimer = this.timers.setTimeout(() => {
      this.restartTimer = undefined;
      this.restarting = this.restart(client).finally(() => { this.restarting = undefined; });
    }, delay);
  }

  private async restart(old: Client): Promise<void> {
    if (old !== this.client || !this.sink) return;
    this.restarts++;
    this.lastRestartAt = this.options.clock.now();
    let next: Client;
    try {
      next = await this.connect((c) => { this.nextClient = c; });
    } catch (error) {
      this.nextClient = undefined;
      if (!this.sink || old !== this.client) return;
      this.logger.warn({ err: error }, 'discord: restarting the client failed; the old one serves until the next try');
      this.scheduleRestart(old, 'the last restart failed');
      return;
    }
    this.nextClient = undefined;
    if (!this.sink || old !== this.client) {
      await destroyClient(next);
      return;
    }
    this.client = next;
    this.statusDetail = undefined;
    this.logger.info({ restarts: this.restarts }, 'discord: client restarted');
    // The old client goes in the background (its close may take seconds); stop() waits for it.
    const retiring = destroyClient(old).finally(() => this.retiring.delete(retiring));
    this.retiring.add(retiring);
  }

  /** Replies shown while they are written: a message created, then edited over REST (SPEC §16). */
  readonly live = discordLiveCalls(() => {
    if (!this.client) throw new ChannelError('DISCORD_NOT_RUNNING', `The Discord channel (account ${this.accountId}) is not running.`);
    return this.client;
  }, (what, call) => this.withRetry(what, call));

  /** Text, image lines as embeds, files as uploads (see {@link sendDiscordReply}). */
  async send(target: DeliveryTarget, message: OutboundMessage): Promise<void> {
    await sendDiscordReply({
      client: () => {
        if (!this.client) throw new ChannelError('DISCORD_NOT_RUNNING', `The Discord channel (account ${this.accountId}) is not running.`);
        return this.client;
      },
      overRest: this.shards !== undefined,
      attempt: (what, call) => this.withRetry(what, call),
      channel: (chatId) => this.sendableChannel(chatId),
    }, target, message);
  }

  /** Opens an attachment's bytes from Discord's CDN only (SPEC §15; see {@link fetchDiscordMedia}). */
  async fetchMedia(attachment: Attachment, options: { signal: AbortSignal; maxBytes: number }): Promise<MediaDownload> {
    return fetchDiscordMedia(this.options.account.apiBase, attachment, options);
  }

  /**
   * One REST call of a delivery, tried again while Discord did not take it (`delivery.maxAttempts`); the
   * chunk's nonce makes a retry of a message Discord did create answer with that message.
   */
  private withRetry<T>(what: string, call: () => Promise<T>): Promise<T> {
    return retryDelivery(what, call, discordRetryVerdict, this.options.delivery ?? DEFAULT_DELIVERY_RETRY, {
      onRetry: (notice) => this.logger.warn({ call: what, attempt: notice.attempt, attemptsLeft: notice.attemptsLeft, reason: notice.reason }, 'Discord did not take a delivery; trying again'),
    });
  }

  /** The ack reaction: `PUT /channels/:id/messages/:id/reactions/:emoji/@me` (needs Add Reactions, Read Message History). */
  async react(target: DeliveryTarget, messageId: string, emoji: string): Promise<void> {
    const client = this.client;
    if (!client) throw new ChannelError('DISCORD_NOT_RUNNING', `The Discord channel (account ${this.accountId}) is not running.`);
    await this.withRetry('addReaction', () => client.rest.put(Routes.channelMessageOwnReaction(target.chatId, messageId, discordReactionPath(emoji))));
  }

  async typing(target: DeliveryTarget): Promise<void> {
    if (this.shards && this.client) {
      await this.client.rest.post(Routes.channelTyping(target.chatId));
      return;
    }
    const channel = await this.sendableChannel(target.chatId);
    await channel.sendTyping();
  }

  private createClient(shard?: number): Client {
    const { apiBase } = this.options.account;
    const client = new Client({
      ...(shard === undefined ? {} : { shards: [shard], shardCount: this.options.account.shardCount ?? 1 }),
      intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent],
      partials: [Partials.Channel],
      allowedMentions: ALLOWED_MENTIONS,
      ...(apiBase ? { rest: { api: apiBase } } : {}),
    });
    const guarded = guardDispatches(client, {
      context: this.context,
      dropped: (event, reason, shardId) => this.logger.warn({ event, reason, shardId }, 'discord: dropped a malformed gateway event'),
      failed: (event, error, shardId) => {
        this.logger.error({ err: error, event, shardId }, 'discord: discord.js failed on a gateway event; the channel goes on');
        const reason = `${event}: ${(error as Error)?.message ?? String(error)}`;
        // A shard client (cluster mode) is replaced by giving its lease up: reconnected fresh here or elsewhere.
        if (this.shards?.holds(client)) this.shards.drop(client, reason);
        else this.scheduleRestart(client, reason);
      },
    });
    if (!guarded) this.logger.warn('discord: this discord.js version cannot be guarded against malformed gateway events; the process guard remains');
    client.on(Events.MessageCreate, (message) => {
      if (client !== this.client && client !== this.nextClient && !this.shards?.holds(client)) return;
      this.intake = this.intake.then(() => this.receive(message, client));
    });
    client.on(Events.Error, (err) => this.logger.error({ err }, 'discord client error'));
    client.on(Events.Warn, (warning) => this.logger.warn({ warning }, 'discord client warning'));
    client.on(Events.ShardError, (err, shardId) => {
      const level = this.statusDetail === RECONNECTING ? 'debug' : 'warn';
      this.logger[level]({ err, shardId }, 'discord gateway connection error; discord.js reconnects');
    });
    // discord.js reconnects on its own; say so once per outage, not on every attempt.
    client.on(Events.ShardReconnecting, (shardId) => {
      if (this.client !== client || this.statusDetail === RECONNECTING || this.state !== 'running') return;
      this.statusDetail = RECONNECTING;
      this.logger.warn({ shardId }, 'discord gateway connection lost; reconnecting');
    });
    const back = (shardId: number) => {
      if (this.client !== client || this.statusDetail !== RECONNECTING) return;
      this.statusDetail = undefined;
      this.logger.info({ shardId }, 'discord gateway connection back');
    };
    client.on(Events.ShardResume, back);
    client.on(Events.ShardReady, back);
    client.on(Events.ShardDisconnect, (event, shardId) => {
      if (this.shards?.holds(client)) return this.shards.drop(client, `gateway closed with code ${event.code}`);
      if (this.client !== client || this.state === 'starting') return;
      const failure = startError(Object.assign(new Error(`gateway closed with code ${event.code}`), { code: event.code }), this.options.account);
      const detail = failure.message;
      this.fail(detail);
      // Its code (DISCORD_TOKEN_REJECTED for 4004) tells the supervisor whether to retry.
      this.lastFailure = failure;
      // The supervisor says it in one line (and retries unless the failure is definite).
      this.logger.debug({ shardId, code: event.code }, `discord gateway closed for good: ${detail}`);
    });
    return client;
  }

  /** Normalizes one message and hands it to the gateway; a failure is logged and never stops the client. */
  private receive(message: Message, client: Client): Promise<void> {
    const correlationId = randomUUID();
    return runWithLogContext({ ...this.context, correlationId }, () => this.handle(message, client, correlationId));
  }

  private async handle(message: Message, client: Client, correlationId: string): Promise<void> {
    const log = this.logger.child({ correlationId, messageId: safeString(() => message.id), chatId: safeString(() => message.channelId) });
    try {
      const sink = this.sink;
      if (!client.user || !sink) return;
      const result = normalizeDiscordMessage(factsOf(message), {
        accountId: this.accountId,
        botUserId: client.user.id,
        botRoleIds: botRoleIdsOf(client, message),
        receivedAt: this.options.clock.now(),
      });
      if (result.kind === 'ignored') {
        log.debug({ reason: result.reason }, 'discord message ignored');
        return;
      }
      const submission = await sink({ ...result.message, correlationId });
      this.shards?.accepted({ chatId: message.channelId, guildId: message.guildId, messageId: message.id });
      log.debug({ status: submission.status, sessionKey: submission.sessionKey }, 'discord message submitted');
    } catch (err) {
      log.error({ err }, 'discord message could not be handled; the channel goes on');
    }
  }

  private async sendableChannel(chatId: string): Promise<SendableChannels> {
    const client = this.client;
    if (!client) throw new ChannelError('DISCORD_NOT_RUNNING', `The Discord channel (account ${this.accountId}) is not running.`);
    const channel = client.channels.cache.get(chatId) ?? await client.channels.fetch(chatId);
    if (!channel?.isSendable()) throw new ChannelError('DISCORD_CHANNEL_UNAVAILABLE', `Discord channel ${chatId} cannot be written to by this bot (deleted, or missing the Send Messages permission).`);
    return channel;
  }

  private fail(detail: string): void {
    this.state = 'failed';
    this.statusDetail = detail;
  }
}
