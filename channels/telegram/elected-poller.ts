import { GrammyError, type Bot } from 'grammy';
import type { Update } from 'grammy/types';
import type { ChannelLease, ChannelLeases } from '../../src/core/channel-leases.ts';
import { ChannelError, ShuttingDownError } from '../../src/core/errors.ts';
import type { Logger } from '../../src/core/logger.ts';

/** Thrown inside a polling term that has ended (the lease was lost): ends its loop without confirming the update. */
export class PollerTermEnded extends ChannelError {
  constructor() {
    super('TELEGRAM_POLLER_STANDBY', 'This replica no longer holds the Telegram poller lease; the update is left to the new poller.');
  }
}

/** Options of {@link ElectedPoller}. */
export interface ElectedPollerOptions {
  leases: ChannelLeases;
  /** The lease name, one per bot account. */
  name: string;
  logger: Logger;
  allowedUpdates: readonly string[];
  /** A fresh grammy Bot for one polling term (API root, retries and `botInfo` set; no middleware). */
  createBot(): Bot;
  /** Hands one update to the gateway; rejects when it was not taken (the update is then not confirmed). */
  handle(update: Update): Promise<void>;
  /** Polling began or ended on this replica. */
  onChange?(polling: boolean): void;
  /**
   * After a 409 (another `getUpdates` consumer, such as a just-unfrozen former poller confirming its offset),
   * the holder polls again after this long without giving the lease up (default 1 s).
   */
  conflictRetryMs?: number;
}

/** One stretch of polling while the lease is held, on a Bot of its own (its offset starts from Telegram's). */
interface Term {
  bot: Bot;
  ended: boolean;
  /** Updates being handed over. */
  busy: number;
  loop?: Promise<void>;
}

/**
 * Telegram long polling by one elected replica per bot (SPEC §13; Telegram allows one `getUpdates` consumer
 * per token). The replica holding the lease polls; the others stand by and win it when the holder dies. An
 * update's offset is confirmed only by the next `getUpdates`, after its handover settled, so a takeover
 * redelivers at most the update in flight, which the delivery-id dedupe drops. A term that ends while an
 * update is in flight ends after it, without confirming it; one that ends idle stops its long poll at once.
 * An update the gateway could not take ends the term too (not confirmed) and the lease is given up, so that
 * it is tried again, here or on another replica.
 */
export class ElectedPoller {
  private lease?: ChannelLease;
  private term?: Term;
  private stopped = false;
  private conflictTimer?: NodeJS.Timeout;

  constructor(private readonly options: ElectedPollerOptions) {}

  /** True while this replica polls. */
  get polling(): boolean {
    return this.term !== undefined && !this.term.ended;
  }

  /** Campaigns for the lease; resolves after the first try (polling begun when it was won). */
  async start(): Promise<void> {
    this.stopped = false;
    this.lease = await this.options.leases.campaign(this.options.name, { won: () => this.begin(), lost: () => this.end() });
  }

  /** Gives the lease up and stops polling (waits for the update in flight). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.conflictTimer);
    await this.lease?.stop();
    this.lease = undefined;
    const term = this.term;
    this.end();
    await term?.loop;
  }

  private begin(): void {
    if (this.stopped) return;
    const term: Term = { bot: this.options.createBot(), ended: false, busy: 0 };
    this.term = term;
    term.bot.use(async (ctx) => {
      if (term.ended) throw new PollerTermEnded();
      term.busy++;
      try {
        await this.options.handle(ctx.update);
      } finally {
        term.busy--;
      }
      if (term.ended) throw new PollerTermEnded();
    });
    // Any failure ends the loop without confirming the update (grammy confirms with the next getUpdates).
    term.bot.catch((error) => { throw error.error; });
    term.loop = term.bot.start({ allowed_updates: [...this.options.allowedUpdates] as never, onStart: () => { if (!term.ended) this.options.onChange?.(true); } })
      .catch((error: unknown) => {
        if (term.ended || error instanceof PollerTermEnded || error instanceof ShuttingDownError) return;
        if (error instanceof GrammyError && error.error_code === 409 && this.lease?.held) {
          this.options.logger.warn({ err: error }, 'Telegram: another getUpdates consumer interfered (409); polling again shortly');
          term.ended = true;
          this.term = undefined;
          this.conflictTimer = setTimeout(() => { if (!this.stopped && this.lease?.held && !this.term) this.begin(); }, this.options.conflictRetryMs ?? 1000);
          this.conflictTimer.unref();
          return;
        }
        this.options.logger.warn({ err: error }, 'Telegram polling stopped; giving the poller lease up so that polling is tried again');
        void this.lease?.resign();
      })
      .finally(() => {
        if (this.term === term) this.end();
      });
  }

  private end(): void {
    const term = this.term;
    if (!term || term.ended) return;
    this.term = undefined;
    term.ended = true;
    // Idle: stop the long poll (it confirms only updates already handed over). Busy: the update ends the loop.
    if (term.busy === 0 && term.bot.isRunning()) {
      term.bot.stop().catch((err: unknown) => this.options.logger.debug({ err }, 'Telegram poller: stopping the long poll failed'));
    }
    this.options.onChange?.(false);
  }
}
