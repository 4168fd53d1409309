import type { ChannelCluster, ChannelLease, ChannelLeases, ChannelWatermark, ChannelWatermarks, LeaseHandlers } from '../../src/core/channel-leases.ts';

interface Campaign extends ChannelLease {
  replica: string;
  handlers: LeaseHandlers;
  active: boolean;
}

/**
 * An in-memory stand-in for the cluster's leases (the PostgreSQL ones are tested in test/cluster): one
 * object per cluster, {@link replica} gives each replica its view. A free lease goes to the first campaign;
 * the others wait in line. {@link end} plays the holder's death (its connection ended): it is told `lost`
 * and the next in line wins, as the next poll of a real standby would.
 */
export class FakeLeases {
  private readonly lines = new Map<string, Campaign[]>();
  private readonly holders = new Map<string, Campaign>();

  /** The leases of one replica. */
  replica(id: string): ChannelLeases {
    return { campaign: async (name, handlers) => this.campaign(id, name, handlers) };
  }

  /** The replica holding `name`, if any. */
  holder(name: string): string | undefined {
    return this.holders.get(name)?.replica;
  }

  /** The holder of `name` dies: it loses the lease (told `lost`), and the next campaign in line wins it. */
  end(name: string): void {
    const holder = this.holders.get(name);
    if (!holder) throw new Error(`fake leases: nobody holds ${name}`);
    this.holders.delete(name);
    holder.active = false;
    holder.handlers.lost();
    this.promote(name);
  }

  private campaign(replica: string, name: string, handlers: LeaseHandlers): Campaign {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const leases = this;
    const line = this.lines.get(name) ?? [];
    this.lines.set(name, line);
    const campaign: Campaign = {
      name, replica, handlers, active: true,
      get held() { return leases.holders.get(name) === campaign; },
      resign: async () => {
        if (leases.holders.get(name) !== campaign) return;
        leases.holders.delete(name);
        handlers.lost();
        line.push(campaign);
        leases.promote(name);
      },
      stop: async () => {
        campaign.active = false;
        const at = line.indexOf(campaign);
        if (at >= 0) line.splice(at, 1);
        if (leases.holders.get(name) === campaign) {
          leases.holders.delete(name);
          leases.promote(name);
        }
      },
    };
    line.push(campaign);
    this.promote(name);
    return campaign;
  }

  private promote(name: string): void {
    if (this.holders.has(name)) return;
    const line = this.lines.get(name) ?? [];
    const next = line.shift();
    if (!next) return;
    this.holders.set(name, next);
    next.handlers.won();
  }
}

/** Watermarks in memory (the PostgreSQL store is tested in test/cluster); `set` moves one by hand. */
export class MemoryWatermarks implements ChannelWatermarks {
  readonly marks = new Map<string, ChannelWatermark>();

  async advance(account: string, mark: ChannelWatermark): Promise<void> {
    const key = `${account}/${mark.chatId}`;
    const known = this.marks.get(key);
    if (!known || BigInt(mark.lastId) > BigInt(known.lastId)) this.marks.set(key, { ...mark });
  }

  async list(account: string, sinceMs: number): Promise<ChannelWatermark[]> {
    return [...this.marks.entries()].filter(([k, m]) => k.startsWith(`${account}/`) && m.at >= sinceMs).map(([, m]) => ({ ...m }));
  }

  /** Sets a mark as it is, even backwards (a replica that died before its last marks were written). */
  set(account: string, mark: ChannelWatermark): void {
    this.marks.set(`${account}/${mark.chatId}`, { ...mark });
  }
}

/** A cluster of fake leases and memory watermarks for one replica. */
export function fakeCluster(leases: FakeLeases, replica: string, watermarks: ChannelWatermarks): ChannelCluster {
  return { leases: leases.replica(replica), watermarks };
}
