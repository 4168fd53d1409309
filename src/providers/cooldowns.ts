import type { Clock } from '../core/clock.ts';

/** Options of {@link CooldownBook}. */
export interface CooldownOptions {
  /** Time source: cooldowns end on it. */
  clock: Clock;
  /** Cooldown after the first failure in a row (ms); doubles with each further one. Default 10 s. */
  baseMs?: number;
  /** Longest cooldown after failures other than `PROVIDER_AUTH` (ms). Default 5 min. */
  maxMs?: number;
  /**
   * Cooldown after `PROVIDER_AUTH` (ms), at least; a refused key will not heal by itself soon. Default 30 min.
   * Backoff longer than it (many failures in a row) wins.
   */
  authMs?: number;
}

/** One credential that is cooling down, as /status and the dashboard show it. */
export interface CooldownEntry {
  providerId: string;
  /** Which of the provider's keys (0 = `apiKey`, then `apiKeys` in order). */
  keyIndex: number;
  /** Epoch ms when the credential may be used again. */
  until: number;
  /** Failures in a row since its last success. */
  failures: number;
  /** The ProviderError code of the latest failure. */
  lastCode: string;
}

/**
 * Cooldowns of provider credentials (a provider id and one of its API keys), shared by every failover chain of a
 * gateway. A failure cools the credential down with exponential backoff ({@link CooldownOptions.baseMs}, doubling
 * per failure in a row, capped at {@link CooldownOptions.maxMs}; a refused key for {@link CooldownOptions.authMs});
 * a success clears it. The failure count outlives the cooldown itself, so a key that fails again right after its
 * cooldown ended waits twice as long.
 */
export class CooldownBook {
  private readonly clock: Clock;
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly authMs: number;
  private readonly entries = new Map<string, CooldownEntry>();

  constructor(options: CooldownOptions) {
    this.clock = options.clock;
    this.baseMs = options.baseMs ?? 10_000;
    this.maxMs = options.maxMs ?? 5 * 60_000;
    this.authMs = options.authMs ?? 30 * 60_000;
  }

  /** Records a failure of the credential and cools it down. Returns when the cooldown ends (epoch ms). */
  fail(providerId: string, keyIndex: number, code: string): number {
    const key = keyOf(providerId, keyIndex);
    const failures = (this.entries.get(key)?.failures ?? 0) + 1;
    // 2 ** 30 keeps the product finite however many failures pile up; the cap applies long before.
    const backoff = Math.min(this.baseMs * 2 ** Math.min(failures - 1, 30), this.maxMs);
    const duration = code === 'PROVIDER_AUTH' ? Math.max(this.authMs, backoff) : backoff;
    const until = this.clock.now() + duration;
    this.entries.set(key, { providerId, keyIndex, until, failures, lastCode: code });
    return until;
  }

  /** Records a success: the credential's cooldown and failure count are cleared. */
  succeed(providerId: string, keyIndex: number): void {
    this.entries.delete(keyOf(providerId, keyIndex));
  }

  /** When the credential's cooldown ends (epoch ms); undefined when it is not cooling down now. */
  coolingUntil(providerId: string, keyIndex: number): number | undefined {
    const entry = this.entries.get(keyOf(providerId, keyIndex));
    return entry && entry.until > this.clock.now() ? entry.until : undefined;
  }

  /** The credentials cooling down now, the soonest to end first (copies). */
  snapshot(): CooldownEntry[] {
    const now = this.clock.now();
    return [...this.entries.values()].filter((e) => e.until > now).map((e) => ({ ...e })).sort((a, b) => a.until - b.until);
  }
}

function keyOf(providerId: string, keyIndex: number): string {
  return `${keyIndex}:${providerId}`;
}
