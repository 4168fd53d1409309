import type { ResolvedConfig } from '../config/resolved.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import type { SessionEntry } from '../sessions/entry.ts';

/** What session tools read of sessions. */
export interface SessionReader {
  get(key: string): Promise<SessionEntry | undefined>;
  /** Every stored session (live entries where active), in key order. */
  all(): AsyncIterable<SessionEntry>;
}

/** Chain lengths beyond this are not followed (a corrupt parent chain cannot loop). */
const MAX_CHAIN = 16;

/** The one answer for a session that does not exist and one the caller may not see, so nothing leaks. */
export const NOT_VISIBLE = 'Error: no visible session has that key.';

/** True for keys made by `sessions_spawn`. */
export function isSubagentKey(key: string): boolean {
  try {
    return Boolean(parseSessionKey(key).subagentId);
  } catch {
    return false;
  }
}

/**
 * `tools.sessions.visibility` (SPEC §11): `tree` = the caller and the sessions it spawned, recursively;
 * `agent` = every session of the caller's agent; `all` = every session.
 */
export class SessionVisibility {
  private readonly config: ResolvedConfig;
  private readonly reader: SessionReader;

  constructor(config: ResolvedConfig, reader: SessionReader) {
    this.config = config;
    this.reader = reader;
  }

  get mode(): 'tree' | 'agent' | 'all' {
    return this.config.tools.sessions.visibility;
  }

  /** The target's entry when the caller may see it, else undefined (also when it does not exist). */
  async resolve(caller: SessionEntry, rawKey: string): Promise<SessionEntry | undefined> {
    let key: string;
    try {
      key = parseSessionKey(rawKey).key;
    } catch {
      return undefined;
    }
    const target = key === caller.key ? caller : await this.reader.get(key);
    return target && (await this.canSee(caller, target)) ? target : undefined;
  }

  async canSee(caller: SessionEntry, target: SessionEntry): Promise<boolean> {
    if (this.mode === 'all' || target.key === caller.key) return true;
    if (this.mode === 'agent') return target.agentId === caller.agentId;
    return this.descends(target, caller.key);
  }

  /** Visible sessions, at most `limit`. */
  async list(caller: SessionEntry, limit: number): Promise<SessionEntry[]> {
    const out: SessionEntry[] = [];
    if (this.mode === 'tree') {
      // Children only ever have sub-agent keys; collect the parent links once, then walk down from the caller.
      const children = new Map<string, SessionEntry[]>();
      for await (const e of this.reader.all()) {
        if (e.parentKey && isSubagentKey(e.key)) children.set(e.parentKey, [...(children.get(e.parentKey) ?? []), e]);
      }
      const queue: SessionEntry[] = [caller];
      while (queue.length && out.length < limit) {
        const e = queue.shift() as SessionEntry;
        out.push(e);
        queue.push(...(children.get(e.key) ?? []));
      }
      return out;
    }
    for await (const e of this.reader.all()) {
      if (await this.canSee(caller, e)) out.push(e);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** True when `target` was spawned (directly or through its ancestors) by `ancestorKey`. */
  private async descends(target: SessionEntry, ancestorKey: string): Promise<boolean> {
    let current: SessionEntry | undefined = target;
    for (let i = 0; i < MAX_CHAIN && current?.parentKey && isSubagentKey(current.key); i++) {
      if (current.parentKey === ancestorKey) return true;
      current = await this.reader.get(current.parentKey);
    }
    return false;
  }
}
