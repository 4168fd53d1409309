import { randomUUID } from 'node:crypto';
import { Client, Events, GatewayIntentBits, Partials, type Message, type SendableChannels } from 'discord.js';
import type { ChannelAdapter, ChannelStatus, InboundSink } from '../../src/core/channel-adapter.ts';
import { ChannelError } from '../../src/core/errors.ts';
import type { Logger } from '../../src/core/logger.ts';
import type { DeliveryTarget, OutboundMessage } from '../../src/core/message.ts';
import type { DiscordAccountConfig } from '../../src/config/resolved.ts';
import type { ChannelFactoryContext } from '../types.ts';
import { botRoleIdsOf, factsOf } from './facts.ts';
import { normalizeDiscordMessage } from './normalize.ts';
import { renderDiscord } from './render.ts';
import { DiscordStartTimeout, startError, tokenSetting } from './start-error.ts';

/** Options of {@link createDiscordChannel}. */
export interface DiscordChannelOptions extends ChannelFactoryContext {
  account: DiscordAccountConfig;
  /** How long `start()` waits for the gateway to be ready before it gives up (default 30 s). */
  startTimeoutMs?: number;
}

const RECONNECTING = 'reconnecting to the Discord gateway';

/** Model output never pings anyone but, through the reply reference, the person who asked. */
const ALLOWED_MENTIONS = { parse: [], repliedUser: true };

/**
 * The Discord channel of one account (discord.js Gateway with the MessageContent intent): DMs, guild
 * channels and threads in; replies rendered and split to 2000 characters out.
 */
export function createDiscordChannel(options: DiscordChannelOptions): ChannelAdapter {
  return new DiscordChannel(options);
}

class DiscordChannel implements ChannelAdapter {
  readonly id = 'discord' as const;
  readonly accountId: string;
  status: ChannelStatus = 'stopped';
  statusDetail?: string;
  private readonly options: DiscordChannelOptions;
  private readonly logger: Logger;
  private client?: Client;
  private sink?: InboundSink;
  /** Messages are handed to the gateway one at a time, in arrival order. */
  private intake: Promise<void> = Promise.resolve();

  constructor(options: DiscordChannelOptions) {
    this.options = options;
    this.accountId = options.account.accountId;
    this.logger = options.logger.child({ channel: 'discord', accountId: this.accountId });
  }

  async start(sink: InboundSink): Promise<void> {
    const { account } = this.options;
    if (!account.token) {
      this.fail('no token');
      throw new ChannelError('DISCORD_TOKEN_MISSING', `Discord is enabled but has no bot token: set ${tokenSetting(this.accountId)}.`);
    }
    this.sink = sink;
    this.status = 'starting';
    this.statusDetail = undefined;
    const client = this.createClient();
    this.client = client;
    const ready = new Promise<void>((resolve) => client.once(Events.ClientReady, () => resolve()));
    const loggedIn = client.login(account.token).then(() => ready);
    loggedIn.catch(() => undefined); // A late rejection after a timeout is not unhandled.
    const ms = this.options.startTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new DiscordStartTimeout(ms)), ms); });
    try {
      await Promise.race([loggedIn, timeout]);
    } catch (error) {
      const failure = startError(error, account);
      this.fail(failure.message);
      this.client = undefined;
      await destroyClient(client);
      throw failure;
    } finally {
      clearTimeout(timer);
    }
    this.status = 'running';
    this.logger.info({ botUserId: client.user?.id, botName: client.user?.username, guilds: client.guilds.cache.size }, 'discord connected');
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.sink = undefined;
    this.status = 'stopped';
    await this.intake;
    if (client) await destroyClient(client);
  }

  async send(target: DeliveryTarget, message: OutboundMessage): Promise<void> {
    const chunks = renderDiscord(message);
    if (chunks.length === 0) return;
    const channel = await this.sendableChannel(target.chatId);
    const replyTo = message.replyTo ?? target.replyToId;
    // In a DM the reply reference only adds noise; in a busy channel it shows what is answered.
    const reference = replyTo && target.chatType !== 'direct' ? { reply: { messageReference: replyTo, failIfNotExists: false } } : {};
    for (const [i, content] of chunks.entries()) {
      await channel.send({ content, allowedMentions: ALLOWED_MENTIONS, ...(i === 0 ? reference : {}) });
    }
  }

  async typing(target: DeliveryTarget): Promise<void> {
    const channel = await this.sendableChannel(target.chatId);
    await channel.sendTyping();
  }

  private createClient(): Client {
    const { apiBase } = this.options.account;
    const client = new Client({
      intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent],
      partials: [Partials.Channel],
      allowedMentions: ALLOWED_MENTIONS,
      ...(apiBase ? { rest: { api: apiBase } } : {}),
    });
    client.on(Events.MessageCreate, (message) => {
      this.intake = this.intake.then(() => this.receive(message));
    });
    client.on(Events.Error, (err) => this.logger.error({ err }, 'discord client error'));
    client.on(Events.Warn, (warning) => this.logger.warn({ warning }, 'discord client warning'));
    client.on(Events.ShardError, (err, shardId) => {
      const level = this.statusDetail === RECONNECTING ? 'debug' : 'warn';
      this.logger[level]({ err, shardId }, 'discord gateway connection error; discord.js reconnects');
    });
    // discord.js reconnects on its own; say so once per outage, not on every attempt.
    client.on(Events.ShardReconnecting, (shardId) => {
      if (this.client !== client || this.statusDetail === RECONNECTING || this.status !== 'running') return;
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
      if (this.client !== client || this.status === 'starting') return;
      const detail = startError(Object.assign(new Error(`gateway closed with code ${event.code}`), { code: event.code }), this.options.account).message;
      this.fail(detail);
      this.logger.error({ shardId, code: event.code }, `discord gateway closed for good: ${detail}`);
    });
    return client;
  }

  /** Normalizes one message and hands it to the gateway; a failure is logged and never stops the client. */
  private async receive(message: Message): Promise<void> {
    const correlationId = randomUUID();
    const log = this.logger.child({ correlationId, messageId: message.id, chatId: message.channelId });
    try {
      const client = this.client;
      const sink = this.sink;
      if (!client?.user || !sink) return;
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
    this.status = 'failed';
    this.statusDetail = detail;
  }
}

/**
 * Destroys a client for good. Works around @discordjs/ws 1.2: destroying a shard while it waits for
 * HELLO or READY (a gateway that does not answer, a reconnect in progress) aborts that wait, whose
 * handler then runs a second, concurrent destroy that leaves the first one pending forever and
 * schedules a reconnect after the client is gone. The waits are detached and reconnects disarmed
 * first (feature-detected: a fixed version skips this), and the wait for the close is bounded.
 */
async function destroyClient(client: Client, boundMs = 5000): Promise<void> {
  type Shard = { internalConnect?: () => Promise<void>; timeoutAbortControllers?: Map<string, AbortController> };
  const internals = client.ws as unknown as { _ws?: { strategy?: { shards?: Map<number, Shard> } } | null };
  for (const shard of internals._ws?.strategy?.shards?.values() ?? []) {
    if (shard.timeoutAbortControllers instanceof Map) shard.timeoutAbortControllers.clear();
    if (typeof shard.internalConnect === 'function') shard.internalConnect = async () => undefined;
  }
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => { timer = setTimeout(resolve, boundMs); });
  await Promise.race([client.destroy().catch(() => undefined), bound]);
  clearTimeout(timer);
}
