/**
 * What channels need from cluster mode (SPEC §13), as ports: channels import only `src/core`, and `main.ts`
 * passes PostgreSQL implementations (`src/cluster/leader-lease.ts`, `src/cluster/channel-watermarks.ts`).
 * Without them (one machine) every channel ingests on its own, as it always did.
 */

/** Told when this replica wins or loses a lease. Called in turn: never two `won` without a `lost` between. */
export interface LeaseHandlers {
  /** This replica holds the lease now: start ingesting (poll, connect the shard). */
  won(): void;
  /** It holds it no more (its connection ended, or it resigned): stop ingesting at once; another replica may have it. */
  lost(): void;
}

/** One campaign for a lease, from {@link ChannelLeases.campaign}. */
export interface ChannelLease {
  readonly name: string;
  /** True while this replica holds the lease. */
  readonly held: boolean;
  /** Gives the lease up (when held; `lost` is called) and campaigns again after the poll interval. */
  resign(): Promise<void>;
  /** Stops campaigning for good, giving the lease up when held (`lost` is not called). */
  stop(): Promise<void>;
}

/**
 * Cluster-wide leases: at most one replica holds a name at a time, and a holder that dies or freezes loses
 * it within the lease time (`cluster.laneLeaseMs`), after which another campaigning replica wins it.
 */
export interface ChannelLeases {
  /**
   * Campaigns for `name` until stopped: `won` when this replica gets it, `lost` when it loses it, and on
   * again. Resolves after the first try, so that `held` already says whether this replica won at once.
   */
  campaign(name: string, handlers: LeaseHandlers): Promise<ChannelLease>;
}

/** The last message accepted in one chat of an account (a Discord channel), for back-filling a gap. */
export interface ChannelWatermark {
  chatId: string;
  /** The guild of the chat; none for a DM (Discord sends DMs on shard 0). */
  guildId?: string;
  /** The newest accepted message id (a Discord snowflake, as a decimal string). */
  lastId: string;
  /** Epoch ms of its acceptance. */
  at: number;
}

/** Watermarks shared by the replicas (the last accepted message per chat), moved only forward. */
export interface ChannelWatermarks {
  /**
   * Records that `mark.lastId` of `mark.chatId` was accepted; a lower id than the stored one changes
   * nothing. Writes may be batched: a mark may lag, never lead (a lagging one only means more duplicates,
   * which the delivery-id dedupe drops).
   */
  advance(account: string, mark: ChannelWatermark): Promise<void>;
  /** The marks of `account` accepted at or after `sinceMs`. */
  list(account: string, sinceMs: number): Promise<ChannelWatermark[]>;
}

/** The cluster facilities a channel gets in cluster mode (`ChannelFactoryContext.cluster`). */
export interface ChannelCluster {
  leases: ChannelLeases;
  watermarks: ChannelWatermarks;
}
