import type { LedgerRecord } from './ledger-record.ts';
import { recordTotal } from './ledger-record.ts';

/** Token sums over a set of LLM calls. */
export interface TokenTotals {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  totalTokens: number;
  /** LLM calls that returned (failed calls use no tokens and are not in the ledger). */
  llmCalls: number;
  /** Calls whose usage was counted with our tokenizer because the provider reported none. */
  estimatedCalls: number;
}

/**
 * `GET /usage`: the gateway's token totals, per channel, and scheduled work apart (SPEC §17): per job and the
 * heartbeat. A job's or heartbeat's calls are also in `totals` and in `channels.internal`.
 */
export interface UsageReport {
  /** When the ledger begins (its first record), or when this process started if it is empty. */
  since: string;
  totals: TokenTotals;
  channels: Record<string, TokenTotals>;
  /** Per job id: the records with that `jobId`. Absent where a ledger store does not sum them (cluster mode, for now). */
  jobs?: Record<string, TokenTotals>;
  /** The records of heartbeat runs (`run: "heartbeat"`). Absent where a ledger store does not sum them. */
  heartbeat?: TokenTotals;
}

export function emptyTotals(): TokenTotals {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, totalTokens: 0, llmCalls: 0, estimatedCalls: 0 };
}

function add(into: TokenTotals, record: LedgerRecord): void {
  into.inputTokens += record.inputTokens;
  into.outputTokens += record.outputTokens;
  into.cacheReadTokens += record.cacheReadTokens;
  into.cacheWriteTokens += record.cacheWriteTokens;
  into.totalTokens += recordTotal(record);
  into.llmCalls++;
  if (record.isEstimated) into.estimatedCalls++;
}

/** {@link RuntimeTotals} as stored in the ledger snapshot. */
export interface RuntimeTotalsState {
  first: string | undefined;
  totals: TokenTotals;
  channels: [string, TokenTotals][];
  keys: [string, TokenTotals & { sessionIds: string[]; latest: { sessionId: string; totals: TokenTotals } }][];
  /**
   * Per job id, and the heartbeat (SPEC §17). Always written; a snapshot without them (written before they were
   * summed, or by an older version) is not used, so they are recomputed from the ledger (`readSnapshot`).
   */
  jobs?: [string, TokenTotals][];
  heartbeat?: TokenTotals;
}

function sum(into: TokenTotals, t: TokenTotals): void {
  into.inputTokens += t.inputTokens;
  into.outputTokens += t.outputTokens;
  into.cacheReadTokens += t.cacheReadTokens;
  into.cacheWriteTokens += t.cacheWriteTokens;
  into.totalTokens += t.totalTokens;
  into.llmCalls += t.llmCalls;
  into.estimatedCalls += t.estimatedCalls;
}

/**
 * Token totals of the whole gateway and of each channel, over every record of the ledger (read back at
 * start, then kept current by the turn observer), so they match the ledger across restarts.
 */
export class RuntimeTotals {
  private readonly totals = emptyTotals();
  private readonly channels = new Map<string, TokenTotals>();
  /** Per session key, across its resets (every session id it had), and its latest session's own totals. */
  private readonly keys = new Map<string, TokenTotals & { sessionIds: Set<string>; latest: { sessionId: string; totals: TokenTotals } }>();
  /** Per job id: the records of its runs. */
  private readonly jobs = new Map<string, TokenTotals>();
  private readonly heartbeat = emptyTotals();
  private first: string | undefined;
  private readonly startedAt: number;

  constructor(startedAt: number) {
    this.startedAt = startedAt;
  }

  add(record: LedgerRecord): void {
    this.first ??= record.timestamp;
    add(this.totals, record);
    let channel = this.channels.get(record.channel);
    if (!channel) {
      channel = emptyTotals();
      this.channels.set(record.channel, channel);
    }
    add(channel, record);
    if (record.jobId) {
      let job = this.jobs.get(record.jobId);
      if (!job) {
        job = emptyTotals();
        this.jobs.set(record.jobId, job);
      }
      add(job, record);
    } else if (record.run === 'heartbeat') {
      add(this.heartbeat, record);
    }
    let key = this.keys.get(record.sessionKey);
    if (!key) {
      key = { ...emptyTotals(), sessionIds: new Set(), latest: { sessionId: record.sessionId, totals: emptyTotals() } };
      this.keys.set(record.sessionKey, key);
    }
    add(key, record);
    key.sessionIds.add(record.sessionId);
    if (key.latest.sessionId !== record.sessionId) key.latest = { sessionId: record.sessionId, totals: emptyTotals() };
    add(key.latest.totals, record);
  }

  /** Totals of one session id (the key's latest session; zero for an older or unused one). */
  ofSession(sessionKey: string, sessionId: string): TokenTotals {
    const latest = this.keys.get(sessionKey)?.latest;
    return latest?.sessionId === sessionId ? { ...latest.totals } : emptyTotals();
  }

  /** Totals of one session key over all its sessions (resets included), and how many sessions that was. */
  ofKey(sessionKey: string): TokenTotals & { sessions: number } {
    const key = this.keys.get(sessionKey);
    if (!key) return { ...emptyTotals(), sessions: 0 };
    const { sessionIds, latest: _latest, ...totals } = key;
    return { ...totals, sessions: sessionIds.size };
  }

  /** The whole state, for the ledger snapshot. */
  toJSON(): RuntimeTotalsState {
    return {
      first: this.first,
      totals: { ...this.totals },
      channels: [...this.channels.entries()].map(([id, t]) => [id, { ...t }]),
      keys: [...this.keys.entries()].map(([key, { sessionIds, latest, ...totals }]) => [
        key, { ...totals, sessionIds: [...sessionIds], latest: { sessionId: latest.sessionId, totals: { ...latest.totals } } },
      ]),
      jobs: [...this.jobs.entries()].map(([id, t]) => [id, { ...t }]),
      heartbeat: { ...this.heartbeat },
    };
  }

  /** Starts from a saved state (replacing what is there). */
  load(state: RuntimeTotalsState): void {
    this.first = state.first;
    Object.assign(this.totals, state.totals);
    this.channels.clear();
    for (const [id, t] of state.channels) this.channels.set(id, { ...t });
    this.keys.clear();
    for (const [key, { sessionIds, latest, ...totals }] of state.keys) {
      this.keys.set(key, { ...totals, sessionIds: new Set(sessionIds), latest: { sessionId: latest.sessionId, totals: { ...latest.totals } } });
    }
    this.jobs.clear();
    for (const [id, t] of state.jobs ?? []) this.jobs.set(id, { ...t });
    Object.assign(this.heartbeat, state.heartbeat ?? emptyTotals());
  }

  /** Takes in totals of records that all came before this one's (history read back while new calls came in). */
  absorbOlder(older: RuntimeTotals): void {
    const state = older.toJSON();
    if (state.first !== undefined) this.first = state.first;
    sum(this.totals, state.totals);
    for (const [id, t] of state.channels) {
      const channel = this.channels.get(id);
      if (channel) sum(channel, t);
      else this.channels.set(id, { ...t });
    }
    for (const [id, t] of state.jobs ?? []) {
      const job = this.jobs.get(id);
      if (job) sum(job, t);
      else this.jobs.set(id, { ...t });
    }
    if (state.heartbeat) sum(this.heartbeat, state.heartbeat);
    for (const [key, { sessionIds, latest, ...totals }] of state.keys) {
      const mine = this.keys.get(key);
      if (!mine) {
        this.keys.set(key, { ...totals, sessionIds: new Set(sessionIds), latest: { sessionId: latest.sessionId, totals: { ...latest.totals } } });
        continue;
      }
      sum(mine, totals);
      for (const id of sessionIds) mine.sessionIds.add(id);
      // The newer records decide the latest session; the older ones add to it when it is the same.
      if (mine.latest.sessionId === latest.sessionId) sum(mine.latest.totals, latest.totals);
    }
  }

  snapshot(): UsageReport {
    const channels: Record<string, TokenTotals> = {};
    for (const [id, t] of [...this.channels.entries()].sort(([a], [b]) => a.localeCompare(b))) channels[id] = { ...t };
    const jobs: Record<string, TokenTotals> = {};
    for (const [id, t] of [...this.jobs.entries()].sort(([a], [b]) => a.localeCompare(b))) jobs[id] = { ...t };
    return { since: this.first ?? new Date(this.startedAt).toISOString(), totals: { ...this.totals }, channels, jobs, heartbeat: { ...this.heartbeat } };
  }
}
