import type pg from 'pg';
import type { ChannelWatermark, ChannelWatermarks } from '../core/channel-leases.ts';

interface Row {
  account: string;
  mark: ChannelWatermark;
}

const UPSERT = `
INSERT INTO sb_channel_watermark (account, chat_id, guild_id, last_id, at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::numeric[], $5::timestamptz[])
ON CONFLICT (account, chat_id) DO UPDATE SET
  last_id = GREATEST(sb_channel_watermark.last_id, EXCLUDED.last_id),
  at = GREATEST(sb_channel_watermark.at, EXCLUDED.at),
  guild_id = COALESCE(EXCLUDED.guild_id, sb_channel_watermark.guild_id)`;

const LIST = `
SELECT chat_id, guild_id, last_id::text AS last_id, (extract(epoch FROM at) * 1000)::float8 AS at
FROM sb_channel_watermark WHERE account = $1 AND at >= to_timestamp($2::float8 / 1000) ORDER BY chat_id`;

/** The larger of two snowflakes (decimal strings of unsigned 64-bit integers). */
export function laterId(a: string, b: string): string {
  return BigInt(a) >= BigInt(b) ? a : b;
}

/**
 * {@link ChannelWatermarks} in `sb_channel_watermark` (migration 003). Marks are written in batches: while
 * one upsert runs, newer marks collect (the highest per chat) and go in the next one, so a busy channel
 * costs far fewer statements than messages. The upsert keeps the highest id (`GREATEST`), so replicas
 * writing the same chat never move a mark back. A failed write keeps its marks for the next one.
 */
export class PgChannelWatermarks implements ChannelWatermarks {
  private readonly pending = new Map<string, Row>();
  private chain: Promise<void> = Promise.resolve();
  private queued?: Promise<void>;

  constructor(private readonly pool: Pick<pg.Pool, 'query'>) {}

  advance(account: string, mark: ChannelWatermark): Promise<void> {
    this.merge({ account, mark });
    if (!this.queued) {
      const write = this.chain.then(() => {
        this.queued = undefined;
        return this.write([...this.pending.values()].splice(0));
      });
      this.queued = write;
      this.chain = write.catch(() => undefined);
    }
    return this.queued;
  }

  async list(account: string, sinceMs: number): Promise<ChannelWatermark[]> {
    const rows = (await this.pool.query<{ chat_id: string; guild_id: string | null; last_id: string; at: number }>(LIST, [account, sinceMs])).rows;
    return rows.map((r) => ({ chatId: r.chat_id, ...(r.guild_id ? { guildId: r.guild_id } : {}), lastId: r.last_id, at: Number(r.at) }));
  }

  /** Waits for the writes started so far (shutdown, tests). */
  async flush(): Promise<void> {
    await (this.queued ?? this.chain);
  }

  private merge(row: Row): void {
    const key = `${row.account}\u0000${row.mark.chatId}`;
    const known = this.pending.get(key);
    if (!known) {
      this.pending.set(key, row);
      return;
    }
    const lastId = laterId(known.mark.lastId, row.mark.lastId);
    this.pending.set(key, {
      account: row.account,
      mark: { chatId: row.mark.chatId, guildId: row.mark.guildId ?? known.mark.guildId, lastId, at: Math.max(known.mark.at, row.mark.at) },
    });
  }

  private async write(rows: Row[]): Promise<void> {
    for (const r of rows) this.pending.delete(`${r.account}\u0000${r.mark.chatId}`);
    if (rows.length === 0) return;
    try {
      await this.pool.query(UPSERT, [
        rows.map((r) => r.account), rows.map((r) => r.mark.chatId), rows.map((r) => r.mark.guildId ?? null),
        rows.map((r) => r.mark.lastId), rows.map((r) => new Date(r.mark.at).toISOString()),
      ]);
    } catch (error) {
      for (const r of rows) this.merge(r);
      throw error;
    }
  }
}
