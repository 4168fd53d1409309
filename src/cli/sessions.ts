import type { ResolvedConfig } from '../config/resolved.ts';
import { StateLock } from '../core/state-lock.ts';
import { totalTokens, type SessionEntry } from '../sessions/entry.ts';
import { openSessionStore } from '../stores.ts';
import { plural } from '../core/plural.ts';
import { findCommandTarget, gatewaySessions } from './gateway-client.ts';

/** Options of `switchboard sessions`. */
export interface SessionsOptions {
  json?: boolean;
  /** Only sessions updated in the last 24 hours. */
  active?: boolean;
  channel?: string;
  /** Only this agent's sessions. */
  agent?: string;
  limit: number;
  now: number;
}

type Listed = SessionEntry & { totalTokens: number };

/** Pages through `GET /admin/sessions` of the running gateway, or the store in-process when none runs. */
async function listSessions(config: ResolvedConfig, options: SessionsOptions): Promise<Listed[]> {
  const since = options.now - 86_400_000;
  const out: Listed[] = [];
  const keep = (e: SessionEntry) => { if (!options.active || e.updatedAt >= since) out.push({ ...e, totalTokens: totalTokens(e.tokens) }); };
  const target = await findCommandTarget(config);
  if (target.kind === 'gateway') {
    const query = {
      limit: String(Math.min(options.limit, 1000)), ...(options.channel ? { channel: options.channel } : {}), ...(options.agent ? { agent: options.agent } : {}),
    };
    for await (const entry of gatewaySessions(target.client, query)) {
      keep(entry);
      if (out.length >= options.limit) break;
    }
    return out;
  }
  const lock = await StateLock.acquire(config.stateDir, { role: 'cli', command: 'switchboard sessions' });
  const store = await openSessionStore(config.store);
  try {
    let cursor: string | undefined;
    do {
      const page = await store.list({ channel: options.channel, agentId: options.agent, limit: Math.min(options.limit, 1000), cursor });
      page.entries.forEach(keep);
      cursor = page.nextCursor;
    } while (cursor && out.length < options.limit);
    return out.slice(0, options.limit);
  } finally {
    await store.close();
    await lock.release();
  }
}

/** `switchboard sessions [--json] [--active] [--channel CH] [--agent ID]`. */
export async function runSessions(config: ResolvedConfig, options: SessionsOptions, out: NodeJS.WritableStream): Promise<void> {
  const sessions = await listSessions(config, options);
  if (options.json) {
    out.write(`${JSON.stringify({ sessions }, null, 2)}\n`);
    return;
  }
  if (!sessions.length) {
    out.write('No sessions yet.\n');
    return;
  }
  for (const s of sessions) {
    out.write(`${s.key}\n  id ${s.sessionId} · agent ${s.agentId} · ${s.channel} · ${plural(s.messageCount, 'message')} · ${plural(s.totalTokens, 'token')} · updated ${new Date(s.updatedAt).toISOString()}\n`);
  }
}
