import type { Logger } from '../core/logger.ts';
import type { TokenLedger } from './ledger.ts';
import type { LedgerRecord } from './ledger-record.ts';
import { coversActiveFile, readSnapshot, snapshotPath, writeSnapshot, type LedgerSnapshot } from './ledger-snapshot.ts';
import { LedgerSummary } from './ledger-summary.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { ProviderTracker } from './provider-tracker.ts';
import { RuntimeTotals } from './runtime-totals.ts';

/** Options of {@link LedgerHistory}. */
export interface LedgerHistoryOptions {
  ledger: TokenLedger;
  totals: RuntimeTotals;
  providers: ProviderTracker;
  metrics: GatewayMetrics;
  logger: Logger;
  startedAt: number;
  recentLimit?: number;
  /** A snapshot is saved after this many new records (and at each rotation and at shutdown). Default 2000. */
  snapshotEvery?: number;
  /** A tail up to this size is read before start-up goes on; a longer one in the background. Default 4 MiB. */
  inlineBytes?: number;
  /** How long after start-up the background read begins (default 300 ms). */
  backgroundDelayMs?: number;
}

/** Totals, sums and recent calls being built from records, before they join the live ones. */
interface Building {
  totals: RuntimeTotals;
  summary: LedgerSummary;
}

/**
 * How the accounting learns the ledger's history at start without re-reading it: a snapshot of everything
 * derived from the ledger (`ledger-snapshot.ts`), saved as records are written, plus the few records after
 * it. Without a usable snapshot (first start on an old ledger, a crash right after a rotation, a file edited
 * by hand), the archives and the active file are read again in the background, a few milliseconds at a
 * time, so the gateway listens at once and `/usage` waits for {@link ready}.
 */
export class LedgerHistory {
  /** Settles once the whole history is counted. */
  ready: Promise<void> = Promise.resolve();
  private readonly options: LedgerHistoryOptions;
  private readonly file: string;
  private summary: LedgerSummary;
  /** False while history is still being read: the live figures are then partial and never saved. */
  private complete = true;
  private closing = false;
  private sinceSnapshot = 0;
  private savedRotations = 0;
  private saving: Promise<void> | undefined;
  private saveAgain = false;

  constructor(options: LedgerHistoryOptions) {
    this.options = options;
    this.file = snapshotPath(options.ledger.file);
    this.summary = new LedgerSummary(options.recentLimit);
  }

  /** Restores the snapshot and reads what came after it (inline when short, else in the background). */
  async open(): Promise<void> {
    const { ledger, logger } = this.options;
    await ledger.open();
    const started = Date.now();
    const snapshot = await this.usableSnapshot();
    const end = ledger.position().offset;
    const start = snapshot?.active.offset ?? 0;
    const archives = snapshot ? [] : ledger.archives.map((a) => ({ ...a }));
    if (snapshot) ledger.loadIndex({ archives: snapshot.archives, activeKeys: snapshot.active.keys, activeSince: snapshot.active.since });
    if (!archives.length && end - start <= (this.options.inlineBytes ?? 4 * 1024 * 1024)) {
      const live = { totals: this.options.totals, summary: this.summary };
      if (snapshot) this.restoreInto(live, snapshot);
      const count = await ledger.scanRange(start, end, (r) => this.take(live, r));
      this.seed(live.summary);
      if (count) logger.debug({ records: count, ms: Date.now() - started, fromSnapshot: Boolean(snapshot) }, 'token ledger read back');
      this.sinceSnapshot = count;
      if (count || !snapshot) await this.save();
      ledger.resumeRotation(); // rotates now when the file is due (an old one, a new day)
      return;
    }
    // Long history to read: the gateway starts now; the history joins the live figures once read.
    this.complete = false;
    ledger.holdRotation();
    logger.info({ archives: archives.length, bytes: end - start }, 'reading the token ledger history in the background; /usage waits for it');
    // Begins once start-up is through (the server listening), so it does not slow that down either.
    const begin = new Promise<void>((resolve) => setTimeout(resolve, this.options.backgroundDelayMs ?? 300));
    this.ready = begin.then(() => this.readInBackground(snapshot, archives, start, end, started)).finally(() => ledger.resumeRotation());
    this.ready.catch((err: unknown) => logger.error({ err }, 'could not read the token ledger history; totals start from here'));
  }

  /** A record just appended to the ledger (the live totals already have it). */
  added(record: LedgerRecord): void {
    this.summary.add(record);
    this.sinceSnapshot++;
  }

  /** The ledger wrote everything queued: a good moment for a snapshot. */
  settled(): void {
    if (!this.complete || this.closing) return;
    if (this.sinceSnapshot >= (this.options.snapshotEvery ?? 2000) || this.options.ledger.rotations !== this.savedRotations) void this.save();
  }

  /** Flushes the ledger, saves a last snapshot and closes the ledger (shutdown). */
  async close(): Promise<void> {
    this.closing = true;
    await this.options.ledger.flush();
    await this.ready.catch(() => undefined);
    await this.saving;
    await this.save(true);
    await this.options.ledger.close();
  }

  private async usableSnapshot(): Promise<LedgerSnapshot | undefined> {
    const { ledger, logger } = this.options;
    const snapshot = await readSnapshot(this.file);
    if (!snapshot) return undefined;
    const listed = new Set(snapshot.archives.map((a) => a.name.replace(/\.gz$/, '')));
    const unlisted = ledger.archives.filter((a) => !listed.has(a.name.replace(/\.gz$/, '')));
    if (unlisted.length || !(await coversActiveFile(ledger.file, snapshot.active))) {
      logger.warn({ unlistedArchives: unlisted.map((a) => a.name) }, 'the token ledger snapshot does not match the ledger files; reading them again');
      return undefined;
    }
    return snapshot;
  }

  private restoreInto(into: Building, snapshot: LedgerSnapshot): void {
    into.totals.load(snapshot.totals);
    into.summary.absorbOlder(LedgerSummary.from(snapshot.summary, this.options.recentLimit));
  }

  private take(into: Building, record: LedgerRecord): void {
    into.totals.add(record);
    into.summary.add(record);
  }

  /** Feeds the provider tracker and the metrics from a summary of records older than any they have. */
  private seed(summary: LedgerSummary): void {
    for (const group of summary.groupList()) {
      this.options.providers.seedGroup(group);
      this.options.metrics.seedGroup(group);
    }
    this.options.providers.seedOlderRecent(summary.recent());
  }

  private async readInBackground(
    snapshot: LedgerSnapshot | undefined, archives: { name: string; rotatedAt: number; compressed: boolean }[], start: number, end: number, started: number,
  ): Promise<void> {
    const { ledger, logger } = this.options;
    const older: Building = { totals: new RuntimeTotals(this.options.startedAt), summary: new LedgerSummary(this.options.recentLimit) };
    if (snapshot) this.restoreInto(older, snapshot);
    let count = 0;
    for (const archive of archives) {
      if (this.closing) return;
      const keys = await ledger.scanArchive(archive, (r) => { this.take(older, r); count++; }, () => this.closing);
      const entry = ledger.archives.find((a) => a.name.replace(/\.gz$/, '') === archive.name.replace(/\.gz$/, ''));
      if (entry) entry.keys = keys;
    }
    count += await ledger.scanRange(start, end, (r) => {
      this.take(older, r);
      ledger.activeKeys.add(r.sessionKey);
    }, () => this.closing);
    if (this.closing) return;
    // Everything read came before every live record: it goes underneath.
    this.options.totals.absorbOlder(older.totals);
    this.summary.absorbOlder(older.summary);
    this.seed(older.summary);
    this.complete = true;
    logger.info({ records: count, archives: archives.length, ms: Date.now() - started }, 'token ledger history read');
    await this.options.ledger.flush();
    await this.save(true);
  }

  /** Saves a snapshot of the live figures, when the ledger holds exactly what they count. */
  private async save(force = false): Promise<void> {
    if (this.saving) {
      this.saveAgain = true;
      return this.saving;
    }
    const { ledger } = this.options;
    if (!this.complete || !ledger.settled) return;
    if (!force && this.sinceSnapshot === 0 && ledger.rotations === this.savedRotations) return;
    const position = ledger.position();
    const snapshot: LedgerSnapshot = {
      version: 1,
      savedAt: new Date().toISOString(),
      active: { ...position, keys: ledger.activeKeys.toBase64(), ...(ledger.activeSince !== undefined ? { since: ledger.activeSince } : {}) },
      archives: ledger.archives.map((a) => ({ name: a.name, rotatedAt: a.rotatedAt, ...(a.keys ? { keys: a.keys.toBase64() } : {}) })),
      totals: this.options.totals.toJSON(),
      summary: this.summary.toJSON(),
    };
    const text = JSON.stringify(snapshot);
    this.sinceSnapshot = 0;
    this.savedRotations = ledger.rotations;
    this.saving = writeSnapshot(this.file, text)
      .catch((err: unknown) => this.options.logger.warn({ err, file: this.file }, 'could not save the token ledger snapshot; the next start reads more of the ledger'))
      .finally(() => { this.saving = undefined; });
    await this.saving;
    if (this.saveAgain) {
      this.saveAgain = false;
      await this.save();
    }
  }
}
