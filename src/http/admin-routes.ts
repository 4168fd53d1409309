import type { TranscriptEntry } from '../sessions/transcript.ts';
import { totalTokens, type SessionEntry } from '../sessions/entry.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { SessionStore } from '../sessions/store.ts';
import type { TranscriptStore } from '../sessions/transcript.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import { BudgetExceededError, NotFoundError, BadRequestError } from '../core/errors.ts';
import { jsonError } from './http-error.ts';
import type { HttpApp } from './app.ts';
import { compactionAnswer } from '../agent/commands/context-commands.ts';
import type { CompactionOutcome } from '../agent/context/context-engine.ts';

/** What the admin routes read and change. */
export interface AdminDeps {
  store: SessionStore;
  sessions: SessionManager;
  transcripts: TranscriptStore;
  /** Resets a key in order with its messages; undefined when unknown. */
  resetSession(key: string): Promise<SessionEntry | undefined>;
  /** Compacts a key in order with its messages (as `/compact`); undefined when unknown. */
  compactSession?(key: string): Promise<{ entry: SessionEntry; outcome: CompactionOutcome } | undefined>;
  /** The token budget of an entry's agent (0 = none). */
  budgetOf?(entry: SessionEntry): number;
}

/** An entry as the API shows it; `tokenBudget` (used / budget of the current session id) when its agent has one. */
export function presentEntry(entry: SessionEntry, active: boolean, budget = 0): SessionEntry & { active: boolean; totalTokens: number; tokenBudget?: { used: number; budget: number } } {
  const used = (entry.sessionTokens?.input ?? 0) + (entry.sessionTokens?.output ?? 0);
  return { ...entry, active, totalTokens: totalTokens(entry.tokens), ...(budget ? { tokenBudget: { used, budget } } : {}) };
}

/** A `:key` path parameter as a canonical session key; anything else is a 400 that says what a key looks like. */
export function keyParam(raw: string): string {
  try {
    return parseSessionKey(raw).key;
  } catch {
    throw new BadRequestError(`"${raw}" is not a session key (expected agent:<agentId>:...).`, 'invalid_session_key');
  }
}

function intParam(value: string | undefined, fallback: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new BadRequestError(`Expected a positive integer, got "${value}".`, 'invalid_parameter');
  return Math.min(n, max);
}

/** `/admin/sessions...` (SPEC §7). */
export function mountAdminRoutes(deps: AdminDeps): (app: HttpApp) => void {
  const load = async (key: string): Promise<SessionEntry> => {
    const entry = await deps.sessions.get(key);
    if (!entry) throw new NotFoundError(`No session ${key}.`, 'session_not_found');
    return entry;
  };
  return (app) => {
    app.get('/admin/sessions', async (c) => {
      const channel = c.req.query('channel') || undefined;
      const agentId = c.req.query('agent') || undefined;
      const limit = intParam(c.req.query('limit'), 100, 1000);
      if (c.req.query('active') === '1' || c.req.query('active') === 'true') {
        const active = [...deps.sessions.activeSessions()].map((s) => s.entry).filter((e) => (!channel || e.channel === channel) && (!agentId || e.agentId === agentId))
          .sort((a, b) => (a.key < b.key ? -1 : 1));
        const cursor = c.req.query('cursor');
        const start = cursor ? active.findIndex((e) => e.key > cursor) : 0;
        const page = start < 0 ? [] : active.slice(start, start + limit);
        const nextCursor = start >= 0 && start + limit < active.length ? page[page.length - 1]?.key : undefined;
        return c.json({ sessions: page.map((e) => presentEntry(e, true, deps.budgetOf?.(e))), ...(nextCursor ? { nextCursor } : {}) });
      }
      const page = await deps.store.list({ channel, agentId, limit, cursor: c.req.query('cursor') || undefined });
      const sessions = page.entries.map((stored) => {
        const live = deps.sessions.peek(stored.key);
        const entry = live?.entry ?? stored;
        return presentEntry(entry, Boolean(live), deps.budgetOf?.(entry));
      });
      return c.json({ sessions, ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) });
    });
    app.get('/admin/sessions/:key', async (c) => {
      const key = keyParam(c.req.param('key'));
      const entry = await load(key);
      return c.json(presentEntry(entry, Boolean(deps.sessions.peek(key)), deps.budgetOf?.(entry)));
    });
    app.get('/admin/sessions/:key/history', async (c) => {
      const key = keyParam(c.req.param('key'));
      const entry = await load(key);
      const limit = intParam(c.req.query('limit'), 200, 10_000);
      const all: TranscriptEntry[] = entry.messageCount > 0 ? await deps.transcripts.read(entry.sessionId) : [];
      return c.json({ sessionKey: key, sessionId: entry.sessionId, entries: all.slice(-limit) });
    });
    app.post('/admin/sessions/:key/reset', async (c) => {
      const key = keyParam(c.req.param('key'));
      const entry = await deps.resetSession(key);
      if (!entry) throw new NotFoundError(`No session ${key}.`, 'session_not_found');
      return c.json(presentEntry(entry, Boolean(deps.sessions.peek(key)), deps.budgetOf?.(entry)));
    });
    app.post('/admin/sessions/:key/compact', async (c) => {
      const key = keyParam(c.req.param('key'));
      let result: Awaited<ReturnType<NonNullable<AdminDeps['compactSession']>>>;
      try {
        result = deps.compactSession ? await deps.compactSession(key) : undefined;
      } catch (error) {
        // The session's state (its spent budget) forbids the summary call; retrying will not help until /new.
        if (error instanceof BudgetExceededError) return jsonError(c, 409, error.message, 'session_budget');
        throw error;
      }
      if (!result) throw new NotFoundError(`No session ${key}.`, 'session_not_found');
      const { outcome, entry } = result;
      return c.json({ sessionKey: key, sessionId: entry.sessionId, ...outcome, message: compactionAnswer(outcome), compactionCount: entry.compactionCount, contextTokens: entry.contextTokens });
    });
  };
}
