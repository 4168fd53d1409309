import { Events, Routes, type Client, type Message } from 'discord.js';
import type { ChannelCluster, ChannelLease } from '../../src/core/channel-leases.ts';
import type { Clock } from '../../src/core/clock.ts';
import type { Logger } from '../../src/core/logger.ts';

/** What {@link ShardLeases} needs from the Discord channel. */
export interface ShardHost {
  /** A client of shard `shard` (of `shardCount`), logged in and ready; `created` sees it before it logs in. */
  connectShard(shard: number, created: (client: Client) => void): Promise<Client>;
  destroy(client: Client): Promise<void>;
  /** Runs `work` on the channel's intake queue, after the messages queued so far and before later ones. */
  enqueue(work: () => Promise<void>): void;
  /** Hands one message to the gateway, as a live one would be (normalize, sink, watermark). */
  handle(message: Message, client: Client): Promise<void>;
}

/** Options of {@link ShardLeases}. */
export interface ShardLeasesOptions {
  cluster: ChannelCluster;
  accountId: string;
  /** `channels.discord.shardCount`. */
  shardCount: number;
  host: ShardHost;
  clock: Clock;
  logger: Logger;
  /** Chats with an accepted message this recent are back-filled after a takeover (default 24 h). */
  backfillWindowMs?: number;
  /** At most this many pages of 100 messages are fetched per chat (default 10). */
  maxBackfillPages?: number;
}

interface Slot {
  shard: number;
  lease?: ChannelLease;
  client?: Client;
  /** Bumped on every win and loss: work of an older term stops. */
  term: number;
  connecting?: Promise<void>;
  /** Why the last connection failed (the first start reports it). */
  failure?: unknown;
}

/** The shard of a guild (`(guild_id >> 22) % shardCount`); DMs arrive on shard 0. */
export function shardOf(guildId: string | undefined | null, shardCount: number): number {
  if (!guildId || shardCount <= 1) return 0;
  return Number((BigInt(guildId) >> 22n) % BigInt(shardCount));
}

/**
 * Discord in cluster mode (SPEC §13; design §3): each shard of the account is held by one replica at a
 * time through a lease `discord:<account>:shard:<n>`, connected (its own client, `shards: [n]`) when the
 * lease is won and dropped when it is lost. A fresh IDENTIFY does not replay what the shard missed while
 * nobody held it, so after each win every chat of that shard with an accepted message in the last 24 h is
 * back-filled over REST from its watermark (the last accepted message id, shared through PostgreSQL);
 * what was already taken is dropped by the gateway's message-id dedupe. Replies go over REST from any
 * replica, holder or not.
 */
export class ShardLeases {
  private readonly slots: Slot[];
  private readonly retiring = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly options: ShardLeasesOptions) {
    this.slots = Array.from({ length: Math.max(1, options.shardCount) }, (_v, shard) => ({ shard, term: 0 }));
  }

  /** Shards this replica holds with a connected client. */
  get held(): number {
    return this.slots.filter((s) => s.lease?.held && s.client).length;
  }

  /** True when `client` is the current client of a held shard (its messages are taken). */
  holds(client: Client): boolean {
    return this.slots.some((s) => s.client === client);
  }

  /**
   * Campaigns for every shard; resolves once the shards won at the first try are connected. Rejects with
   * the connection failure (every lease given up) when one of them could not connect.
   */
  async start(): Promise<void> {
    this.stopped = false;
    for (const slot of this.slots) {
      slot.lease = await this.options.cluster.leases.campaign(`discord:${this.options.accountId}:shard:${slot.shard}`, {
        won: () => this.won(slot),
        lost: () => this.lost(slot),
      });
    }
    await Promise.all(this.slots.flatMap((s) => (s.connecting ? [s.connecting] : [])));
    const failed = this.slots.find((s) => s.failure !== undefined);
    if (failed) {
      await this.stop();
      throw failed.failure;
    }
  }

  /** Gives every lease up and closes the shard clients. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.slots.map(async (slot) => {
      const lease = slot.lease;
      slot.lease = undefined;
      await lease?.stop();
      this.lost(slot);
    }));
    await Promise.all(this.slots.flatMap((s) => (s.connecting ? [s.connecting] : [])));
    await Promise.allSettled([...this.retiring]);
  }

  /**
   * Gives up the shard of `client` (discord.js failed on an event, or the gateway closed for good): its
   * lease is resigned, so a fresh client connects it after the poll interval, here or on another replica.
   */
  drop(client: Client, reason: string): void {
    const slot = this.slots.find((s) => s.client === client);
    if (!slot?.lease?.held) return;
    this.options.logger.warn({ shard: slot.shard, reason }, 'discord: giving the shard up to reconnect it');
    void slot.lease.resign();
  }

  /** Records an accepted message's id as its chat's watermark (batched, in the background). */
  accepted(mark: { chatId: string; guildId?: string | null; messageId: string }): void {
    this.options.cluster.watermarks.advance(`discord:${this.options.accountId}`, {
      chatId: mark.chatId, ...(mark.guildId ? { guildId: mark.guildId } : {}), lastId: mark.messageId, at: this.options.clock.now(),
    }).catch((err: unknown) => this.options.logger.warn({ err }, 'discord: could not record watermarks; a takeover back-fills from older ones'));
  }

  private won(slot: Slot): void {
    if (this.stopped) return;
    const term = ++slot.term;
    slot.failure = undefined;
    const { logger, host } = this.options;
    slot.connecting = (async () => {
      try {
        const client = await host.connectShard(slot.shard, (c) => {
          slot.client = c;
          // Back-filled before anything this connection receives later: queued on the intake as it becomes ready.
          c.once(Events.ClientReady, () => host.enqueue(() => this.backfill(slot, c)));
        });
        if (slot.term !== term) {
          await host.destroy(client);
          return;
        }
        logger.info({ shard: slot.shard, shardCount: this.slots.length }, 'discord: shard lease won; shard connected');
      } catch (error) {
        if (slot.term !== term) return;
        slot.client = undefined;
        slot.failure = error;
        logger.warn({ err: error, shard: slot.shard }, 'discord: the shard did not connect; giving its lease up');
        await slot.lease?.resign();
      } finally {
        slot.connecting = undefined;
      }
    })();
  }

  private lost(slot: Slot): void {
    slot.term++;
    const client = slot.client;
    slot.client = undefined;
    if (!client) return;
    if (!this.stopped) this.options.logger.warn({ shard: slot.shard }, 'discord: shard lease lost; shard disconnected (another replica takes it over)');
    const retiring = this.options.host.destroy(client).finally(() => this.retiring.delete(retiring));
    this.retiring.add(retiring);
  }

  /** Fetches what each recently active chat of the shard received after its watermark, oldest first. */
  private async backfill(slot: Slot, client: Client): Promise<void> {
    const { logger, cluster, clock } = this.options;
    const pagesMax = this.options.maxBackfillPages ?? 10;
    let marks;
    try {
      marks = await cluster.watermarks.list(`discord:${this.options.accountId}`, clock.now() - (this.options.backfillWindowMs ?? 86_400_000));
    } catch (err) {
      logger.warn({ err, shard: slot.shard }, 'discord: could not read the watermarks; nothing back-filled');
      return;
    }
    let fetched = 0;
    const mine = marks.filter((m) => shardOf(m.guildId, this.slots.length) === slot.shard);
    for (const mark of mine) {
      let after = mark.lastId;
      try {
        for (let page = 0; page < pagesMax; page++) {
          if (slot.client !== client) return;
          const channel = client.channels.cache.get(mark.chatId) ?? await client.channels.fetch(mark.chatId);
          if (!channel?.isTextBased()) break;
          const batch = [...(await channel.messages.fetch({ after, limit: 100, cache: false })).values()]
            .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
          for (const message of batch) {
            if (slot.client !== client) return;
            await this.options.host.handle(message, client);
          }
          fetched += batch.length;
          if (batch.length < 100) break;
          after = batch.at(-1)!.id;
        }
      } catch (err) {
        logger.warn({ err, shard: slot.shard, chatId: mark.chatId }, 'discord: back-fill of a chat failed; going on with the others');
      }
    }
    logger.info({ shard: slot.shard, chats: mine.length, fetched }, 'discord: back-fill after taking the shard over done');
  }
}

/**
 * A reply over REST alone (any replica; no gateway connection or cache needed). `attempt` runs each chunk's
 * call (the channel's retry of what Discord did not take).
 */
export async function sendOverRest(
  client: Client, chatId: string, chunks: readonly string[], reference?: string, nonces: readonly (string | undefined)[] = [],
  attempt: (what: string, call: () => Promise<unknown>) => Promise<unknown> = (_what, call) => call(),
): Promise<void> {
  for (const [i, content] of chunks.entries()) {
    const nonce = nonces[i];
    await attempt('createMessage', () => client.rest.post(Routes.channelMessages(chatId), {
      body: {
        content, allowed_mentions: { parse: [], replied_user: true }, ...(nonce ? { nonce, enforce_nonce: true } : {}),
        ...(i === 0 && reference ? { message_reference: { message_id: reference, fail_if_not_exists: false } } : {}),
      },
    }));
  }
}
