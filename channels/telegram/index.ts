import { randomUUID } from 'node:crypto';
import { Bot, BotError, GrammyError, webhookCallback } from 'grammy';
import type { Update, UserFromGetMe } from 'grammy/types';
import type { TelegramAccountConfig } from '../../src/config/resolved.ts';
import type { ChannelAdapter, ChannelStatus, HttpRoute, InboundSink } from '../../src/core/channel-adapter.ts';
import { ChannelError, MediaFetchError, ShuttingDownError } from '../../src/core/errors.ts';
import { runWithLogContext } from '../../src/core/log-context.ts';
import type { Logger } from '../../src/core/logger.ts';
import type { Attachment, DeliveryTarget, InboundMessage, MediaDownload, OutboundMessage } from '../../src/core/message.ts';
import type { ChannelFactoryContext } from '../types.ts';
import { deliverMessage, sendTyping, telegramCommands } from './deliver.ts';
import { fetchTelegramMedia } from './media.ts';
import { telegramCallRetry } from './send-retry.ts';
import { reactTo } from './react.ts';
import { telegramLiveCalls } from './live.ts';
import { DEFAULT_DELIVERY_RETRY } from '../../src/core/delivery-retry.ts';
import { TIMED_OUT, withDeadline } from '../../src/core/deadline.ts';
import { ElectedPoller } from './elected-poller.ts';
import { PollingAnswerFailure, pollingWatch, updateBatchGuard } from './update-batch-guard.ts';
import { pollingRetry } from './polling-retry.ts';
import { normalizeUpdate } from './normalize.ts';
import { apiRootOf, telegramStartError, tokenSetting, withoutToken } from './start-error.ts';
import { telegramWebhookRoute, webhookFailure, webhookPath } from './webhook-route.ts';

/** Options of {@link createTelegramChannel}. */
export interface TelegramChannelOptions extends ChannelFactoryContext {
  account: TelegramAccountConfig;
  /** How long `start` waits for Telegram's `getMe` (default 30 s). */
  startTimeoutMs?: number;
  /** Cluster polling: how long the elected poller waits to poll again after a 409 (default 1 s). */
  conflictRetryMs?: number;
  /**
   * Webhook mode: the longest an update waits for the gateway to take it (commit it) before the request is
   * answered 503, so that Telegram delivers it again (default 10 s).
   */
  webhookTimeoutMs?: number;
  /** Timers of that deadline and of the pauses between getUpdates attempts (tests pass their own). */
  timers?: { setTimeout(fn: () => void, ms: number): unknown; clearTimeout(handle: unknown): void };
}

/** The gateway did not take a webhook update within `webhookTimeoutMs`. */
export class WebhookTimeoutError extends ChannelError {
  constructor(ms: number) {
    super('TELEGRAM_WEBHOOK_TIMEOUT', `The update was not taken within ${ms} ms; Telegram will deliver it again.`);
  }
}

/** The only update type the channel acts on; asking for no others saves traffic. */
const ALLOWED_UPDATES = ['message'] as const;

/**
 * The Telegram channel of one account (grammy). Long polling by default: `bot.start` handles updates one
 * after another, which keeps each chat in order, and the gateway's sink resolves as soon as a message is
 * queued, so polling never waits for a turn. In webhook mode the gateway serves
 * `POST /webhooks/telegram/<accountId>` instead and nothing polls; an update is answered 200 only once the
 * gateway took it (committed it, in cluster mode), else 5xx so that Telegram delivers it again. In cluster
 * mode polling is done by one elected replica per bot (see {@link ElectedPoller}); the others stand by.
 */
export function createTelegramChannel(options: TelegramChannelOptions): ChannelAdapter {
  return new TelegramChannel(options);
}

class TelegramChannel implements ChannelAdapter {
  readonly id = 'telegram' as const;
  readonly accountId: string;
  /** A chat action shows for 5 s (or until the bot's next message). */
  readonly typingLapseMs = 5000;
  private state: ChannelStatus = 'stopped';
  private detail?: string;
  /** Why getUpdates fails while polling is in an outage (it is tried again on its own); undefined when it answers. */
  private outage?: string;
  /** The error behind a failure after start-up (a token revoked mid-run), with its code for the supervisor. */
  lastFailure?: ChannelError;
  private bot?: Bot;
  private me?: UserFromGetMe;
  private sink?: InboundSink;
  private polling?: Promise<void>;
  private webhook?: (request: Request) => Promise<Response>;
  private poller?: ElectedPoller;
  private readonly options: TelegramChannelOptions;
  private readonly logger: Logger;

  constructor(options: TelegramChannelOptions) {
    this.options = options;
    this.accountId = options.account.accountId;
    this.logger = options.logger.child({ channel: 'telegram', accountId: this.accountId });
  }

  get status(): ChannelStatus {
    // getUpdates failing (network down, 5xx): not connected until it answers again.
    if (this.state === 'running' && this.outage !== undefined) return 'starting';
    if (this.poller && this.state === 'running') return this.poller.polling ? 'running' : 'standby';
    return this.state;
  }

  get statusDetail(): string | undefined {
    return this.state === 'running' && this.outage !== undefined ? this.outage : this.detail;
  }

  async start(sink: InboundSink): Promise<void> {
    const { account } = this.options;
    this.sink = sink;
    this.state = 'starting';
    this.detail = undefined;
    this.outage = undefined;
    this.lastFailure = undefined;
    try {
      this.checkSettings();
      const bot = this.createBot();
      // One getMe (grammy's init would retry a refused connection forever): a wrong token or API root is
      // reported at once, in one line.
      const me = await bot.api.getMe(AbortSignal.timeout(this.options.startTimeoutMs ?? 30_000) as Parameters<Bot['init']>[0]);
      bot.botInfo = me;
      this.me = me;
      bot.use((ctx) => this.handleUpdate(ctx.update));
      bot.catch((error) => this.onBotError(error));
      this.bot = bot;
      if (account.mode === 'webhook') await this.startWebhook(bot);
      else if (this.options.cluster) await this.startElected(me);
      else await this.startPolling(bot);
      this.state = 'running';
      this.logger.info({ bot: `@${bot.botInfo.username}`, mode: account.mode }, 'Telegram bot connected');
    } catch (error) {
      const failure = telegramStartError(error, account, this.options.startTimeoutMs ?? 30_000);
      this.state = 'failed';
      this.detail = failure.message;
      this.bot = undefined;
      throw failure;
    }
  }

  async stop(): Promise<void> {
    const bot = this.bot;
    if (this.state !== 'failed') this.state = 'stopped';
    this.webhook = undefined;
    const poller = this.poller;
    this.poller = undefined;
    await poller?.stop();
    if (bot?.isRunning()) await bot.stop().catch((err: unknown) => this.logger.warn({ err }, 'could not confirm the last Telegram update on stop'));
    await this.polling;
    this.polling = undefined;
    this.bot = undefined;
  }

  async send(target: DeliveryTarget, message: OutboundMessage): Promise<void> {
    await deliverMessage(this.api(), target, message);
  }

  /** Replies shown while they are written: sendMessage, then editMessageText (SPEC §16). */
  readonly live = telegramLiveCalls(() => this.api());

  /** Opens an attachment's bytes: getFile, then the file URL (SPEC §15; see {@link fetchTelegramMedia}). */
  async fetchMedia(attachment: Attachment, options: { signal: AbortSignal; maxBytes: number }): Promise<MediaDownload> {
    if (!this.bot) throw new MediaFetchError('download_failed', `The Telegram channel (account ${this.accountId}) is not running; the file was not fetched.`);
    return fetchTelegramMedia(this.bot.api, this.options.account, attachment, options);
  }

  async typing(target: DeliveryTarget): Promise<void> {
    await sendTyping(this.api(), target);
  }

  async react(target: DeliveryTarget, messageId: string, emoji: string): Promise<void> {
    await reactTo(this.api(), target, messageId, emoji);
  }

  async registerCommands(commands: readonly { command: string; description: string }[]): Promise<void> {
    await this.api().setMyCommands(telegramCommands(commands));
  }

  routes(): HttpRoute[] {
    if (this.options.account.mode !== 'webhook') return [];
    return [telegramWebhookRoute({
      accountId: this.accountId,
      secret: () => this.options.account.webhookSecret,
      handler: () => (this.state === 'running' ? this.webhook : undefined),
      onMalformed: (reason, correlationId) => this.logger.warn({ correlationId, reason }, 'Telegram webhook: refused a body that is not an update (400)'),
      onError: (error, correlationId) => {
        // Not acknowledged: Telegram delivers the update again (the journal drops it if it was taken).
        if (isShutdown(error)) return webhookFailure(503, 'The gateway is shutting down; Telegram will deliver this again.', 'shutting_down');
        if (error instanceof WebhookTimeoutError) {
          this.logger.warn({ correlationId }, 'Telegram webhook: the update was not taken in time; answered 503 so that Telegram delivers it again');
          return webhookFailure(503, error.message, 'timeout');
        }
        this.logger.error({ err: error, correlationId }, 'Telegram webhook update failed');
        return webhookFailure(500, 'The update could not be handled.', 'internal_error');
      },
    })];
  }

  private api() {
    if (!this.bot) throw new ChannelError('TELEGRAM_NOT_RUNNING', `The Telegram channel (account ${this.accountId}) is not running: check the start-up error in the log.`);
    return this.bot.api;
  }

  private checkSettings(): void {
    const { account } = this.options;
    if (!account.botToken.trim()) {
      throw new ChannelError('TELEGRAM_TOKEN_MISSING', `${tokenSetting(account)} is not set: create a bot with @BotFather and put its token in .env`);
    }
    if (account.mode === 'webhook' && !/^[A-Za-z0-9_-]{1,256}$/.test(account.webhookSecret)) {
      throw new ChannelError('TELEGRAM_WEBHOOK_SECRET', 'Telegram webhook mode needs channels.telegram.webhookSecret: 1-256 characters of A-Z, a-z, 0-9, _ or - (Telegram sends it back with every update).');
    }
  }

  private async startPolling(bot: Bot): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      let started = false;
      this.polling = bot.start({ allowed_updates: ALLOWED_UPDATES, onStart: () => { started = true; resolve(); } })
        .catch((error: unknown) => {
          if (!started) return reject(error);
          if (isShutdown(error)) return;
          this.pollingStopped(telegramStartError(error, this.options.account));
        });
    });
  }

  private async startWebhook(bot: Bot): Promise<void> {
    const { account } = this.options;
    // grammy's own timeout would answer 200 ('return') or throw on a timer we cannot drive: the deadline is ours.
    const handle = webhookCallback(bot, 'std/http', { secretToken: account.webhookSecret, timeoutMilliseconds: Infinity });
    this.webhook = (request) => this.withinDeadline(handle(request));
    const path = webhookPath(this.accountId);
    if (!this.options.publicUrl) {
      this.logger.info({ path }, `Telegram webhook mode: Telegram must be told the URL (setWebhook with url=<public https base>${path} and secret_token=<webhookSecret>)`);
      return;
    }
    const url = `${this.options.publicUrl.replace(/\/+$/, '')}${path}`;
    await bot.api.setWebhook(url, { secret_token: account.webhookSecret, allowed_updates: [...ALLOWED_UPDATES] })
      .then(() => this.logger.info({ url }, 'Telegram webhook registered'))
      .catch((err: unknown) => this.logger.warn({ err, url, apiRoot: apiRootOf(account) }, 'could not register the Telegram webhook; set it by hand'));
  }

  /** Cluster mode, polling: this replica polls only while it holds the account's poller lease. */
  private async startElected(me: UserFromGetMe): Promise<void> {
    const cluster = this.options.cluster!;
    this.poller = new ElectedPoller({
      leases: cluster.leases,
      name: `telegram:${this.accountId}:poller`,
      logger: this.logger,
      allowedUpdates: ALLOWED_UPDATES,
      createBot: () => {
        const bot = this.createBot();
        bot.botInfo = me;
        return bot;
      },
      handle: (update) => this.handleUpdate(update, true),
      ...(this.options.conflictRetryMs !== undefined ? { conflictRetryMs: this.options.conflictRetryMs } : {}),
      onChange: (polling) => this.logger.info({ bot: `@${me.username}` }, polling ? 'Telegram poller lease won: polling' : 'Telegram poller: standing by'),
    });
    await this.poller.start();
  }

  /**
   * Polling stopped for good (a 401 ends grammy's loop; a 404 is ended here): failed, with the error and its
   * code for the supervisor, which restarts the channel or, for a rejected token, gives up with one clear line.
   */
  private pollingStopped(failure: ChannelError): void {
    if (this.state === 'failed') return;
    this.state = 'failed';
    this.detail = failure.message;
    this.outage = undefined;
    this.lastFailure = failure;
    this.logger.debug({ code: failure.code }, `Telegram polling stopped: ${failure.message}`);
  }

  /** A grammy bot for the account, its API calls watched, retried and screened. */
  private createBot(): Bot {
    const { account } = this.options;
    const bot = new Bot(account.botToken, { client: account.apiRoot ? { apiRoot: account.apiRoot } : {} });
    // Deliveries Telegram did not take (reset, timeout, 5xx, 429) are tried again up to `delivery.maxAttempts`.
    const retry = telegramCallRetry(this.options.delivery ?? DEFAULT_DELIVERY_RETRY, (notice) => this.logger.warn(
      { method: notice.what, attempt: notice.attempt, attemptsLeft: notice.attemptsLeft, reason: notice.reason }, 'Telegram did not take a delivery; trying again'));
    // getUpdates failures are tried again by pollingRetry (outside the watch, so that it sees each attempt).
    bot.api.config.use(this.pollingWatch(), pollingRetry(this.options.timers), retry, this.batchGuard());
    return bot;
  }

  /** Watches getUpdates: an outage is reported once at warn, its end at info, a rejected token stops polling. */
  private pollingWatch() {
    return pollingWatch({
      failed: (error, failures) => {
        if (this.state !== 'running' && this.state !== 'starting') return;
        const { account } = this.options;
        const detail = error instanceof PollingAnswerFailure
          ? `The Telegram Bot API at ${apiRootOf(account)} answered ${error.errorCode} (${withoutToken(error.description, account.botToken)}) to getUpdates.`
          : telegramStartError(error, account).message;
        const first = this.outage === undefined;
        this.outage = detail;
        if (first) this.logger.warn({ failures }, `Telegram polling: getUpdates failed: ${detail} (grammy retries; the channel is not connected until it answers)`);
        else this.logger.debug({ failures }, `Telegram polling: getUpdates failed again: ${detail}`);
      },
      recovered: (failures) => {
        if (this.outage === undefined) return;
        this.outage = undefined;
        this.logger.info({ failures }, 'Telegram polling reconnected');
      },
      rejected: (code, description) => {
        if (this.state !== 'running') return;
        this.pollingStopped(telegramStartError(new GrammyError(`Call to 'getUpdates' failed! (${code}: ${description})`, { ok: false, error_code: code, description }, 'getUpdates', {}), this.options.account));
        // grammy retries a 404 forever; a 401 has already ended its loop.
        if (code !== 401 && this.bot?.isRunning()) void this.bot.stop().catch(() => undefined);
        this.poller?.stop().catch(() => undefined);
      },
    });
  }

  /** Screens each getUpdates result: malformed entries dropped (logged), the offset moved past them. */
  private batchGuard() {
    return updateBatchGuard((dropped, streak) => {
      // One warning per run of unreadable batches; the batches after it wait longer and longer (debug).
      const level = streak <= 1 ? 'warn' : 'debug';
      this.logger[level]({ dropped: dropped.count, reasons: dropped.reasons, streak }, 'Telegram getUpdates: dropped malformed updates; polling goes on');
    }, this.options.pollBackoff);
  }

  /** The webhook answer, or a {@link WebhookTimeoutError} when the update was not taken in time. */
  private async withinDeadline(answer: Promise<Response>): Promise<Response> {
    const ms = this.options.webhookTimeoutMs ?? 10_000;
    const response = await withDeadline(answer, ms, this.options.timers);
    if (response === TIMED_OUT) throw new WebhookTimeoutError(ms);
    return response;
  }

  /**
   * One update: normalized, handed to the gateway. A bad update is logged and skipped. A failure of the
   * gateway to take it is thrown when the update can be delivered again (webhook: 5xx; elected poller: not
   * confirmed), else (polling on one machine) logged and skipped as before.
   */
  private handleUpdate(update: Update, rethrow = this.options.account.mode === 'webhook'): Promise<void> {
    const correlationId = randomUUID();
    return runWithLogContext({ channel: 'telegram', accountId: this.accountId, correlationId }, () => this.takeUpdate(update, correlationId, rethrow));
  }

  private async takeUpdate(update: Update, correlationId: string, rethrow: boolean): Promise<void> {
    const sink = this.sink;
    if (!sink || !this.me) return;
    let message: InboundMessage;
    try {
      const result = normalizeUpdate(update, {
        accountId: this.accountId, bot: { id: this.me.id, username: this.me.username }, now: this.options.clock.now(), correlationId,
      });
      if ('ignored' in result) {
        // A malformed update is refused at the edge, visibly; ordinary skips (edits, service messages) are debug.
        const level = result.ignored.startsWith('malformed') ? 'warn' : 'debug';
        this.logger[level]({ correlationId, updateId: update.update_id, reason: result.ignored }, 'Telegram update ignored');
        return;
      }
      message = result.message;
    } catch (error) {
      // Delivering it again would fail the same way: skipped (acknowledged).
      this.logger.error({ err: error, correlationId, updateId: update.update_id }, 'Telegram update could not be handled; skipped');
      return;
    }
    try {
      await sink(message);
    } catch (error) {
      if (error instanceof ShuttingDownError) throw error;
      if (!rethrow) {
        this.logger.error({ err: error, correlationId, updateId: update.update_id }, 'Telegram update could not be handled; skipped');
        return;
      }
      this.logger.warn({ err: error, correlationId, updateId: update.update_id }, 'Telegram update not taken; Telegram delivers it again');
      throw error;
    }
  }

  /**
   * Polling errors from the middleware. Only a shutdown gets here (everything else is caught per update):
   * rethrowing it ends polling without confirming the update, so Telegram delivers it again after the
   * restart, and the journal drops the ones already taken.
   */
  private onBotError(error: BotError): void {
    if (error.error instanceof ShuttingDownError) throw error.error;
    this.logger.error({ err: error.error, updateId: error.ctx.update.update_id }, 'Telegram update failed');
  }
}

/** A refusal by the closing gateway, bare or wrapped by grammy. */
function isShutdown(error: unknown): boolean {
  return error instanceof ShuttingDownError || (error instanceof BotError && error.error instanceof ShuttingDownError);
}
