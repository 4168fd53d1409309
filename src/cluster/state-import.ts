import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import { listArchives, readArchive } from '../accounting/ledger-archive.ts';
import { parseLedgerLine, type LedgerRecord } from '../accounting/ledger-record.ts';
import type { InboundMessage } from '../core/message.ts';
import type { TranscriptEntry } from '../sessions/transcript.ts';
import { insertLedgerRecords } from './pg-ledger-sink.ts';
import { storableString } from './jsonb.ts';
import { entryJson, insertEntries } from './pg-transcript-store.ts';

/** What one run of the import copied (rows already in the database are not counted). */
export interface ImportCounts {
  entries: number;
  pairing: number;
  transcripts: number;
  archivedTranscripts: number;
  transcriptEntries: number;
  ledgerRecords: number;
  pendingMessages: number;
  deliveryIds: number;
  /** Unreadable lines skipped (a torn last line after a crash, or corruption). */
  skippedLines: number;
  /** Transcripts left out: no header and no session entry naming their key. */
  skippedTranscripts: number;
  /** Pending messages left out: their session key cannot be built. */
  skippedMessages: number;
}

/** A fresh set of counts. */
export function emptyCounts(): ImportCounts {
  return {
    entries: 0, pairing: 0, transcripts: 0, archivedTranscripts: 0, transcriptEntries: 0, ledgerRecords: 0,
    pendingMessages: 0, deliveryIds: 0, skippedLines: 0, skippedTranscripts: 0, skippedMessages: 0,
  };
}

/** Runs `work` in one transaction on a client of `pool`. */
async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** Non-empty lines of a text file, parsed; unreadable ones counted. */
function jsonLines(text: string, counts: ImportCounts): unknown[] {
  const out: unknown[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      counts.skippedLines++;
    }
  }
  return out;
}

/**
 * Copies the keyv rows of the `sessions` and `pairing` namespaces (keyv's stored form, byte for byte: the
 * same on @keyv/sqlite and @keyv/postgres). A key already in the cluster keeps its value there. Returns the
 * session id → key of every entry (transcripts without a header take their key from it).
 */
export async function importKeyv(rows: readonly { key: string; value: string }[], pool: pg.Pool, counts: ImportCounts): Promise<Map<string, string>> {
  const keyOfSession = new Map<string, string>();
  for (let start = 0; start < rows.length; start += 500) {
    const chunk = rows.slice(start, start + 500);
    const { rows: inserted } = await pool.query<{ key: string }>(
      'INSERT INTO keyv (key, value) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT (key) DO NOTHING RETURNING key',
      [chunk.map((r) => r.key), chunk.map((r) => r.value)],
    );
    for (const { key } of inserted) {
      if (key.startsWith('sessions:')) counts.entries++;
      else counts.pairing++;
    }
  }
  for (const row of rows) {
    if (!row.key.startsWith('sessions:')) continue;
    try {
      const entry = (JSON.parse(row.value) as { value?: { sessionId?: unknown; key?: unknown } }).value;
      if (typeof entry?.sessionId === 'string' && typeof entry.key === 'string') keyOfSession.set(entry.sessionId, entry.key);
    } catch {
      counts.skippedLines++;
    }
  }
  return keyOfSession;
}

const TRANSCRIPT_FILE = /^([A-Za-z0-9_-]+)\.jsonl(?:\.(?:reset|merged)\.(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})-(\d{2})(?:-(\d{3}))?Z)?$/;

/**
 * Copies every transcript under `<stateDir>/agents/<agentId>/sessions/`: `<id>.jsonl` as current, and
 * `<id>.jsonl.reset.<UTC>` / `.merged.<UTC>` as archived at that time. A transcript whose id is already in the
 * cluster is skipped whole (its rows and entries commit together).
 */
export async function importTranscripts(stateDir: string, pool: pg.Pool, keyOfSession: ReadonlyMap<string, string>, counts: ImportCounts): Promise<void> {
  const agentsDir = path.join(stateDir, 'agents');
  if (!existsSync(agentsDir)) return;
  for (const agentId of (await readdir(agentsDir)).sort()) {
    const dir = path.join(agentsDir, agentId, 'sessions');
    if (!existsSync(dir)) continue;
    for (const name of (await readdir(dir)).sort()) {
      const m = TRANSCRIPT_FILE.exec(name);
      if (!m) continue;
      const sessionId = m[1]!;
      const archivedAt = m[2] ? new Date(`${m[2]}T${m[3]}:${m[4]}:${m[5]}.${m[6] ?? '000'}Z`) : null;
      const file = path.join(dir, name);
      const lines = jsonLines(await readFile(file, 'utf8'), counts) as { type?: string; key?: unknown; createdAt?: unknown }[];
      const header = lines[0]?.type === 'session' ? lines[0] : undefined;
      const key = typeof header?.key === 'string' ? header.key : keyOfSession.get(sessionId);
      if (!key) {
        counts.skippedTranscripts++;
        continue;
      }
      const createdAt = typeof header?.createdAt === 'string' && !Number.isNaN(Date.parse(header.createdAt)) ? new Date(header.createdAt) : (await stat(file)).mtime;
      const entries = lines.filter((l): l is TranscriptEntry => l.type === 'message' || l.type === 'compaction');
      const copied = await inTransaction(pool, async (client) => {
        const { rowCount } = await client.query(
          'INSERT INTO sb_transcript (session_id, session_key, agent_id, created_at, archived_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id) DO NOTHING',
          [sessionId, key, agentId, createdAt, archivedAt],
        );
        if (!rowCount) return false;
        await insertEntries(client, sessionId, entries);
        return true;
      });
      if (!copied) continue;
      counts.transcripts++;
      if (archivedAt) counts.archivedTranscripts++;
      counts.transcriptEntries += entries.length;
    }
  }
}

/** Parses a ledger file's text: its records, in order (torn or foreign lines counted and skipped). */
function ledgerRecords(text: string, counts: ImportCounts): { records: LedgerRecord[]; firstLine?: string } {
  const records: LedgerRecord[] = [];
  let firstLine: string | undefined;
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const record = parseLedgerLine(line);
    if (!record) {
      counts.skippedLines++;
      continue;
    }
    firstLine ??= line;
    records.push(record);
  }
  return { records, firstLine };
}

/**
 * Copies the token ledger: its archives (gzip or not), oldest first, then the active file. A file is known by
 * the hash of its first record, and `sb_migrated` keeps how many of its records were copied (in the same
 * transaction as each batch): a second run copies only what was appended since, a rotated file nothing again.
 */
export async function importLedger(ledgerFile: string, pool: pg.Pool, counts: ImportCounts): Promise<void> {
  const dir = path.dirname(ledgerFile);
  const texts: string[] = [];
  for (const archive of await listArchives(ledgerFile).catch(() => [])) texts.push((await readArchive(dir, archive)).toString('utf8'));
  if (existsSync(ledgerFile)) texts.push(await readFile(ledgerFile, 'utf8'));
  for (const text of texts) {
    const { records, firstLine } = ledgerRecords(text, counts);
    if (!firstLine) continue;
    const source = `ledger:${createHash('sha1').update(firstLine).digest('hex')}`;
    const done = Number((await pool.query<{ records: string }>('SELECT records FROM sb_migrated WHERE source = $1', [source])).rows[0]?.records ?? 0);
    for (let start = done; start < records.length; start += 500) {
      const batch = records.slice(start, start + 500);
      await inTransaction(pool, async (client) => {
        // Under the row lock of the source, a concurrent run cannot copy the same batch too.
        const { rows } = await client.query<{ records: string }>(
          `INSERT INTO sb_migrated (source, records) VALUES ($1, 0) ON CONFLICT (source) DO UPDATE SET source = excluded.source RETURNING records`, [source],
        );
        if (Number(rows[0]?.records ?? 0) !== start) throw new Error('another switchboard migrate is copying the same ledger; run it once at a time');
        await insertLedgerRecords(client, batch, 'migrate');
        await client.query('UPDATE sb_migrated SET records = $2, at = now() WHERE source = $1', [source, start + batch.length]);
      });
      counts.ledgerRecords += batch.length;
    }
  }
}

/** A journal line of `inbox.jsonl` (see `src/gateway/inbox.ts`). */
type InboxRecord =
  | { op: 'in'; key: string; at: number; message: InboundMessage; correlationId: string; sent?: number }
  | { op: 'done' | 'seen'; key: string; at: number }
  | { op: 'sent'; key: string; at: number; count: number };

/**
 * Copies the inbound journal: every delivery id it remembers into `sb_delivery` (the dedupe goes on across the
 * move; outcome `accepted`, as the journal does not tell a finished delivery from a refused one), and each pending message, in the order it was accepted, into its session's queue: `sb_lane.next_seq`
 * advanced by one (a new lane starts at seq 1, `done_seq` 0), the `sb_inbox` row at that seq, with the replies
 * already sent. A delivery id already in the cluster is not copied again.
 */
export async function importInbox(journal: string, pool: pg.Pool, keyOf: (message: InboundMessage) => string, counts: ImportCounts): Promise<void> {
  if (!existsSync(journal)) return;
  const pending = new Map<string, Extract<InboxRecord, { op: 'in' }>>();
  const seen = new Map<string, number>();
  for (const value of jsonLines(await readFile(journal, 'utf8'), counts)) {
    const record = value as InboxRecord;
    if (typeof record?.key !== 'string') continue;
    if (record.op === 'in') {
      pending.set(record.key, record);
    } else if (record.op === 'sent') {
      const p = pending.get(record.key);
      if (p) p.sent = Math.max(p.sent ?? 0, record.count);
    } else {
      pending.delete(record.key);
      seen.set(record.key, record.at);
    }
  }
  for (const record of pending.values()) {
    let sessionKey: string;
    try {
      sessionKey = keyOf(record.message);
    } catch {
      counts.skippedMessages++;
      continue;
    }
    const deliveryKey = storableString(record.key); // as the work queue's intake stores it
    const copied = await inTransaction(pool, async (client) => {
      const fresh = await client.query('INSERT INTO sb_delivery (delivery_key, at, outcome) VALUES ($1, $2, $3) ON CONFLICT (delivery_key) DO NOTHING',
        [deliveryKey, new Date(record.at), 'accepted']);
      if (!fresh.rowCount) return false;
      const { rows } = await client.query<{ next_seq: string }>(
        `INSERT INTO sb_lane (session_key, next_seq) VALUES ($1, 1)
         ON CONFLICT (session_key) DO UPDATE SET next_seq = sb_lane.next_seq + 1,
           ready_at = CASE WHEN sb_lane.next_seq = sb_lane.done_seq THEN now() ELSE sb_lane.ready_at END
         RETURNING next_seq`, [sessionKey],
      );
      await client.query(
        'INSERT INTO sb_inbox (session_key, seq, delivery_key, message, correlation_id, accepted_at, sent) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [sessionKey, rows[0]!.next_seq, deliveryKey, entryJson(record.message), record.correlationId, new Date(record.at), record.sent ?? 0],
      );
      // Replicas already running take it at once (delivered at commit; their poll finds it anyway).
      await client.query("SELECT pg_notify('sb_ready', $1)", [sessionKey]);
      return true;
    });
    if (copied) {
      counts.pendingMessages++;
      counts.deliveryIds++;
    }
  }
  const ids = [...seen.entries()];
  for (let start = 0; start < ids.length; start += 1000) {
    const chunk = ids.slice(start, start + 1000);
    const { rowCount } = await pool.query(
      `INSERT INTO sb_delivery (delivery_key, at, outcome) SELECT k, to_timestamp(a / 1000.0), 'accepted' FROM unnest($1::text[], $2::float8[]) AS t(k, a)
       ON CONFLICT (delivery_key) DO NOTHING`, [chunk.map(([k]) => storableString(k)), chunk.map(([, at]) => at)],
    );
    counts.deliveryIds += rowCount ?? 0;
  }
}
