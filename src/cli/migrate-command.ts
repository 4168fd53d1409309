import { existsSync } from 'node:fs';
import path from 'node:path';
import { ledgerPath } from '../accounting/accounting.ts';
import { isClusterStore, openClusterDatabase, redactUri } from '../cluster/pg-database.ts';
import { emptyCounts, importInbox, importKeyv, importLedger, importTranscripts, type ImportCounts } from '../cluster/state-import.ts';
import type { ResolvedConfig } from '../config/resolved.ts';
import { SwitchboardError } from '../core/errors.ts';
import { plural } from '../core/plural.ts';
import { silentLogger, type Logger } from '../core/logger.ts';
import type { InboundMessage } from '../core/message.ts';
import { StateLock } from '../core/state-lock.ts';
import { agentOf } from '../routing/bindings.ts';
import { buildSessionKey, parseSessionKey } from '../routing/session-key.ts';

/** `switchboard migrate` cannot run as asked (not a cluster URI, no one-machine state to copy). */
export class MigrateError extends SwitchboardError {
  constructor(message: string) {
    super('MIGRATE_INVALID', message, { status: 400 });
  }
}

/** Options of {@link runMigrate}. */
export interface MigrateOptions {
  /** The one-machine install's config (its `stateDir`, `store`, and the routing that built its session keys). */
  config: ResolvedConfig;
  /** `postgres://…` of the cluster database. */
  to: string;
  out: NodeJS.WritableStream;
  logger?: Logger;
}

/**
 * The session key of a pending message, as the gateway builds it (`Gateway.sessionKeyOf`, SPEC §2): internal
 * messages name theirs; the API names its agent; everything else goes by bindings, else the first agent.
 */
export function sessionKeyOfMessage(config: Pick<ResolvedConfig, 'agents' | 'bindings' | 'session'>, message: InboundMessage): string {
  if (message.channel === 'internal') {
    if (!message.internal?.sessionKey) throw new MigrateError('An internal message must name its session key.');
    return parseSessionKey(message.internal.sessionKey).key;
  }
  const first = config.agents[0]?.id ?? 'main';
  const agentId = message.agentId ? (config.agents.find((a) => a.id === message.agentId)?.id ?? first) : agentOf(config.bindings, message, first);
  return buildSessionKey(
    {
      agentId, channel: message.channel, accountId: message.accountId, chatType: message.chatType,
      peerId: message.peerId, groupId: message.groupId, threadId: message.threadId, threadKind: message.threadKind,
    },
    { dmScope: message.dmScope ?? config.session.dmScope, threads: config.session.threads, identityLinks: config.session.identityLinks },
  );
}

/** The keyv rows of the session and pairing namespaces in the one-machine SQLite file (read only). */
async function sqliteRows(file: string): Promise<{ key: string; value: string }[]> {
  if (!existsSync(file)) return [];
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(file, { readonly: true, fileMustExist: true, timeout: 5000 });
  try {
    const hasTable = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'keyv'").get();
    if (!hasTable) return [];
    return db.prepare("SELECT key, value FROM keyv WHERE (key > 'sessions:' AND key < 'sessions;') OR (key > 'pairing:' AND key < 'pairing;') ORDER BY key")
      .all() as { key: string; value: string }[];
  } finally {
    db.close();
  }
}

/** The counts, one line each, as printed. */
export function formatCounts(counts: ImportCounts, to: string): string {
  const lines = [
    `Copied into ${redactUri(to)}:`,
    `  session entries       ${counts.entries}`,
    `  pairing records       ${counts.pairing}`,
    `  transcripts           ${counts.transcripts} (${counts.archivedTranscripts} archived), ${plural(counts.transcriptEntries, 'entry', 'entries')}`,
    `  ledger records        ${counts.ledgerRecords}`,
    `  pending messages      ${counts.pendingMessages}`,
    `  delivery ids          ${counts.deliveryIds}`,
  ];
  if (counts.skippedLines) lines.push(`  skipped ${plural(counts.skippedLines, 'unreadable line')} (a torn last line after a crash?)`);
  if (counts.skippedTranscripts) lines.push(`  skipped ${plural(counts.skippedTranscripts, 'transcript')} with no header and no session entry naming ${counts.skippedTranscripts === 1 ? 'its' : 'their'} key`);
  if (counts.skippedMessages) lines.push(`  skipped ${plural(counts.skippedMessages, 'pending message')} whose session key cannot be built`);
  lines.push('Anything already in the cluster database was left as it is; running this again copies only what is new.');
  return `${lines.join('\n')}\n`;
}

/**
 * `switchboard migrate --to postgres://…` (SPEC §13): copies a one-machine state folder into a cluster
 * database: session entries and pairing (keyv rows), transcripts (archived ones as archived), the token
 * ledger (its archives too) and the inbound journal (pending messages queued in order, delivery ids for the
 * dedupe). Holds the state folder's lock meanwhile, so it refuses while a gateway runs there (and no gateway
 * starts until it is done). Idempotent: rows already in the cluster are not copied again.
 */
export async function runMigrate(options: MigrateOptions): Promise<ImportCounts> {
  const { config, to } = options;
  if (!isClusterStore(to)) throw new MigrateError(`--to must be a postgres:// (or postgresql://) URI of the cluster database, got "${to.split(':')[0]}:…".`);
  if (isClusterStore(config.store)) throw new MigrateError(`This config's store is already a cluster database (${redactUri(config.store)}); migrate copies a one-machine state (store sqlite://…).`);
  if (!config.store.startsWith('sqlite://')) throw new MigrateError(`migrate copies a one-machine state whose store is sqlite://…; this config's store is "${config.store.split(':')[0]}:…".`);
  if (!existsSync(config.stateDir)) throw new MigrateError(`There is no state folder at ${config.stateDir}: nothing to copy. Point SWITCHBOARD_STATE_DIR (or stateDir) at the one-machine install's.`);
  const logger = options.logger ?? silentLogger();
  const lock = await StateLock.acquire(config.stateDir, { role: 'cli', command: 'switchboard migrate' });
  try {
    const pool = await openClusterDatabase({ uri: to, logger, poolSize: 4 });
    try {
      const counts = emptyCounts();
      const keyOfSession = await importKeyv(await sqliteRows(config.store.slice('sqlite://'.length)), pool, counts);
      await importTranscripts(config.stateDir, pool, keyOfSession, counts);
      await importLedger(ledgerPath(config.stateDir), pool, counts);
      await importInbox(path.join(config.stateDir, 'inbox.jsonl'), pool, (message) => sessionKeyOfMessage(config, message), counts);
      options.out.write(formatCounts(counts, to));
      return counts;
    } finally {
      await pool.end();
    }
  } finally {
    await lock.release();
  }
}
