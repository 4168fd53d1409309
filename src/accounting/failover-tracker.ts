/** Where a failover went from and to (SPEC §18). */
export interface FailoverStep {
  from: { providerId: string; model: string; keyIndex: number };
  /** Absent when nothing was left to try. */
  to?: { providerId: string; model: string; keyIndex: number };
  /** The ProviderError code that moved the call on. */
  code: string;
  at: number;
}

/** A credential cooling down, as the cooldown book reports it. */
export interface CooldownView {
  providerId: string;
  keyIndex: number;
  until: number;
  failures: number;
  lastCode: string;
}

/** The failover part of `GET /status` and `/status` (times as ISO strings). */
export interface FailoverReport {
  /** Failovers since start, by the provider a call moved away from. */
  total: number;
  byProvider: Record<string, number>;
  /** The latest, newest first. */
  recent: { from: string; to?: string; code: string; at: string }[];
  /** Keys cooling down now (`keyIndex` 0 = `apiKey`, then `apiKeys`; never the key itself). */
  cooldowns: { providerId: string; keyIndex: number; until: string; failures: number; lastCode: string }[];
}

/** How many recent failovers are kept. */
const RECENT = 20;

/**
 * Counts failovers (a call that moved to another key or model) since start and keeps the latest, for
 * `/status`, the dashboard and `/metrics`; the cooldowns are read from the cooldown book when asked.
 */
export class FailoverTracker {
  private total = 0;
  private readonly byProvider = new Map<string, number>();
  private readonly byReason = new Map<string, number>();
  private readonly recent: FailoverStep[] = [];
  private readonly cooldowns: () => readonly CooldownView[];

  constructor(cooldowns: () => readonly CooldownView[] = () => []) {
    this.cooldowns = cooldowns;
  }

  record(step: FailoverStep): void {
    this.total++;
    this.byProvider.set(step.from.providerId, (this.byProvider.get(step.from.providerId) ?? 0) + 1);
    const reason = `${step.from.providerId}\n${step.to?.providerId ?? ''}\n${step.code}`;
    this.byReason.set(reason, (this.byReason.get(reason) ?? 0) + 1);
    this.recent.unshift(step);
    if (this.recent.length > RECENT) this.recent.pop();
  }

  /** Failovers by (from provider, to provider or "" when none was left, code), for `/metrics`. */
  counts(): { from: string; to: string; code: string; count: number }[] {
    return [...this.byReason].map(([key, count]) => {
      const [from = '', to = '', code = ''] = key.split('\n');
      return { from, to, code, count };
    });
  }

  /** Keys cooling down now. */
  coolingDown(): number {
    return this.cooldowns().length;
  }

  report(): FailoverReport {
    const where = (t: { providerId: string; model: string; keyIndex: number }) => `${t.providerId}/${t.model}${t.keyIndex ? ` (key ${t.keyIndex + 1})` : ''}`;
    return {
      total: this.total,
      byProvider: Object.fromEntries(this.byProvider),
      recent: this.recent.map((s) => ({ from: where(s.from), ...(s.to ? { to: where(s.to) } : {}), code: s.code, at: new Date(s.at).toISOString() })),
      cooldowns: this.cooldowns().map((c) => ({ providerId: c.providerId, keyIndex: c.keyIndex, until: new Date(c.until).toISOString(), failures: c.failures, lastCode: c.lastCode })),
    };
  }
}
