import type { ResolvedConfig } from './config/resolved.ts';
import type { Clock } from './core/clock.ts';
import type { Logger } from './core/logger.ts';
import type { MediaStore } from './media/media-store.ts';

/** What the gateway deletes as it ages: reset archives, old ledger rows (cluster mode) and media. */
export interface HousekeepingDeps {
  config: ResolvedConfig;
  clock: Clock;
  logger: Logger;
  transcripts: { pruneArchives(now: Date, maxAgeMs: number): Promise<number> };
  /** Cluster mode: the shared ledger, whose rows past `ledger.retentionDays` go (any replica may do it). */
  ledger?: { prune(before: Date): Promise<unknown> };
  media: MediaStore;
}

/**
 * Deletes what has outlived its retention, now (media a minute after start: start-up never waits for a sweep) and
 * every 6 hours: transcript archives past `session.resetArchiveRetentionDays`, ledger rows past
 * `ledger.retentionDays`, media past `media.retentionDays` and then the oldest above `media.maxStoreBytes`
 * (SPEC §15). Returns the function that stops it.
 */
export function startHousekeeping(deps: HousekeepingDeps): () => void {
  const { config, clock, logger } = deps;
  const prune = () => void deps.transcripts.pruneArchives(new Date(clock.now()), config.session.resetArchiveRetentionDays * 86_400_000)
    .then((n) => { if (n) logger.info({ deleted: n }, 'deleted expired transcript archives'); })
    .catch((err: unknown) => logger.warn({ err }, 'archive pruning failed'));
  const pruneLedger = () => {
    if (!deps.ledger || !config.ledger.retentionDays) return;
    void deps.ledger.prune(new Date(clock.now() - config.ledger.retentionDays * 86_400_000))
      .catch((err: unknown) => logger.warn({ err }, 'could not delete old ledger rows'));
  };
  const sweepMedia = () => void deps.media.sweep({ now: clock.now(), retentionMs: config.media.retentionDays * 86_400_000, maxBytes: config.media.maxStoreBytes })
    .then((swept) => { if (swept.removed) logger.info(swept, 'deleted expired or over-quota media'); })
    .catch((err: unknown) => logger.warn({ err }, 'media sweep failed'));
  prune();
  pruneLedger();
  const soon = setTimeout(sweepMedia, 60_000);
  soon.unref();
  const every = setInterval(() => { prune(); pruneLedger(); sweepMedia(); }, 6 * 3_600_000);
  every.unref();
  return () => {
    clearTimeout(soon);
    clearInterval(every);
  };
}
