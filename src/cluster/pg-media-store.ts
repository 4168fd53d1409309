import { createHash } from 'node:crypto';
import type pg from 'pg';
import { MediaFetchError } from '../core/errors.ts';
import type { Logger } from '../core/logger.ts';
import { abortableChunks } from '../media/chunks.ts';
import type { MediaStore, StoredMedia } from '../media/media-store.ts';

const SHA256 = /^[0-9a-f]{64}$/;
/**
 * Bytes sent or read per query: pg serializes a parameter and decodes a bytea (one hex string) on the event
 * loop, which for a 20 MB file in one go is a stall of hundreds of milliseconds; 256 KB pieces keep each short.
 */
const CHUNK = 256 * 1024;

/** The chunks regrouped into pieces of about `size` bytes (a network chunk is a few KB). */
function* pieces(chunks: readonly Uint8Array[], size: number): Generator<Buffer> {
  let group: Uint8Array[] = [];
  let length = 0;
  for (const chunk of chunks) {
    for (let offset = 0; offset < chunk.length; ) {
      const take = Math.min(size - length, chunk.length - offset);
      group.push(chunk.subarray(offset, offset + take));
      length += take;
      offset += take;
      if (length === size) {
        yield Buffer.concat(group, length);
        group = [];
        length = 0;
      }
    }
  }
  if (length) yield Buffer.concat(group, length);
}

/** Options of {@link PgMediaStore}. */
export interface PgMediaStoreOptions {
  /** The shared pool of the cluster database. */
  pool: pg.Pool;
  logger?: Logger;
}

interface MediaRow {
  sha256: string;
  mime: string;
  size: string;
  stored_at: Date;
}

function toStored(row: MediaRow): StoredMedia {
  return { sha256: row.sha256, mime: row.mime, size: Number(row.size), storedAt: row.stored_at.getTime() };
}

/**
 * The media store of cluster mode (SPEC §15): one `sb_media` row per file (migration `004-media`), keyed by the
 * SHA-256 of its bytes, so every replica reads what any replica fetched. A put buffers the body (at most
 * `maxBytes`: the name is the hash of all of it) while hashing it, then sends it in pieces; storing bytes already
 * there only refreshes their time and mime type, without sending them again. Reads go in pieces too.
 */
export class PgMediaStore implements MediaStore {
  private readonly pool: pg.Pool;
  private readonly logger: Logger | undefined;

  constructor(options: PgMediaStoreOptions) {
    this.pool = options.pool;
    this.logger = options.logger;
  }

  async put(body: AsyncIterable<Uint8Array> | Uint8Array, options: { mime: string; maxBytes: number; signal?: AbortSignal; now?: number }): Promise<StoredMedia> {
    const { signal, maxBytes } = options;
    signal?.throwIfAborted();
    const hash = createHash('sha256');
    const chunks: Uint8Array[] = [];
    let size = 0;
    let sinceYield = 0;
    for await (const chunk of abortableChunks(body, signal)) {
      // Chunks already at hand arrive without a turn of the event loop in between: give it one now and then.
      sinceYield += chunk.length;
      if (sinceYield >= 1024 * 1024) {
        sinceYield = 0;
        await new Promise((resolve) => setImmediate(resolve));
      }
      size += chunk.length;
      if (size > maxBytes) throw new MediaFetchError('too_large', `The file is larger than ${maxBytes} bytes.`, { status: 413 });
      hash.update(chunk);
      // The body may reuse its buffer for the next chunk.
      chunks.push(Buffer.from(chunk));
    }
    signal?.throwIfAborted();
    const sha256 = hash.digest('hex');
    const storedAt = new Date(options.now ?? Date.now());
    const { rowCount } = await this.pool.query('UPDATE sb_media SET stored_at = $2, mime = $3 WHERE sha256 = $1', [sha256, storedAt, options.mime]);
    if (!rowCount) await this.insert(sha256, options.mime, size, chunks, storedAt);
    return { sha256, size, mime: options.mime, storedAt: storedAt.getTime() };
  }

  /**
   * Sends the bytes in pieces of {@link CHUNK} into a temporary table of the connection (its rows go at commit)
   * and joins them into the row in one statement: one big parameter would be serialized on the event loop in one go.
   */
  private async insert(sha256: string, mime: string, size: number, chunks: readonly Uint8Array[], storedAt: Date): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('CREATE TEMP TABLE IF NOT EXISTS sb_media_piece (n int PRIMARY KEY, data bytea NOT NULL) ON COMMIT DELETE ROWS');
      let n = 0;
      for (const piece of pieces(chunks, CHUNK)) await client.query('INSERT INTO sb_media_piece (n, data) VALUES ($1, $2)', [n++, piece]);
      await client.query(
        `INSERT INTO sb_media (sha256, mime, size, data, stored_at)
         SELECT $1, $2, $3, coalesce(string_agg(data, ''::bytea ORDER BY n), ''::bytea), $4 FROM sb_media_piece
         ON CONFLICT (sha256) DO UPDATE SET stored_at = EXCLUDED.stored_at, mime = EXCLUDED.mime`,
        [sha256, mime, size, storedAt],
      );
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  /** The bytes, read 256 KB per query (files are content-addressed: the pieces of one name always fit together). */
  async get(sha256: string): Promise<Buffer | undefined> {
    if (!SHA256.test(sha256)) return undefined;
    const first = await this.pool.query<{ size: string; data: Buffer }>(
      'SELECT size, substring(data FROM 1 FOR $2) AS data FROM sb_media WHERE sha256 = $1', [sha256, CHUNK],
    );
    const row = first.rows[0];
    if (!row) return undefined;
    const size = Number(row.size);
    if (size <= CHUNK) return row.data;
    const out = Buffer.allocUnsafe(size);
    row.data.copy(out, 0);
    for (let offset = CHUNK; offset < size; offset += CHUNK) {
      const { rows } = await this.pool.query<{ data: Buffer }>('SELECT substring(data FROM $2 FOR $3) AS data FROM sb_media WHERE sha256 = $1', [sha256, offset + 1, CHUNK]);
      // Swept away while being read.
      if (!rows[0]) return undefined;
      rows[0].data.copy(out, offset);
    }
    return out;
  }

  async stat(sha256: string): Promise<StoredMedia | undefined> {
    if (!SHA256.test(sha256)) return undefined;
    const { rows } = await this.pool.query<MediaRow>('SELECT sha256, mime, size, stored_at FROM sb_media WHERE sha256 = $1', [sha256]);
    return rows[0] && toStored(rows[0]);
  }

  /** Deletes rows stored before `now − retentionMs`, then the oldest until the rest hold at most `maxBytes`. */
  async sweep(options: { now: number; retentionMs: number; maxBytes: number }): Promise<{ removed: number; bytes: number }> {
    const expired = await this.pool.query<{ n: number; bytes: string }>(
      'WITH d AS (DELETE FROM sb_media WHERE stored_at < $1 RETURNING size) SELECT count(*)::int AS n, coalesce(sum(size), 0)::bigint AS bytes FROM d',
      [new Date(options.now - options.retentionMs)],
    );
    // Kept: the newest rows whose running total stays within the quota; every older row goes.
    const over = await this.pool.query<{ n: number; bytes: string }>(
      `WITH ranked AS (SELECT sha256, sum(size) OVER (ORDER BY stored_at DESC, sha256 DESC) AS running FROM sb_media),
       d AS (DELETE FROM sb_media m USING ranked r WHERE m.sha256 = r.sha256 AND r.running > $1 RETURNING m.size)
       SELECT count(*)::int AS n, coalesce(sum(size), 0)::bigint AS bytes FROM d`,
      [options.maxBytes],
    );
    const removed = (expired.rows[0]?.n ?? 0) + (over.rows[0]?.n ?? 0);
    const bytes = Number(expired.rows[0]?.bytes ?? 0) + Number(over.rows[0]?.bytes ?? 0);
    if (removed) this.logger?.info({ removed, bytes }, 'media store swept');
    return { removed, bytes };
  }
}
