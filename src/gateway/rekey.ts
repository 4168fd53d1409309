import { existsSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { Logger } from '../core/logger.ts';
import { agentOf } from '../routing/bindings.ts';
import { buildSessionKey, parseSessionKey } from '../routing/session-key.ts';
import type { AgentTranscriptStores } from '../sessions/agent-transcripts.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import type { SessionStore } from '../sessions/store.ts';
import { archiveStamp } from '../sessions/transcript.ts';

/** One entry that the current `identityLinks` and `bindings` would file under another key. */
export interface RekeyMove {
  from: string;
  to: string;
  sessionId: string;
  fromAgent: string;
  toAgent: string;
  /** `move`: the conversation continues under `to`; `archive`: it merged with a more recently active one and is archived. */
  action: 'move' | 'archive';
}

/**
 * The key an entry would get today, or undefined to leave it alone: sub-agent and internal sessions, the
 * API's (their agent is the caller's choice), and DMs under `dmScope: "main"` (one conversation shared by
 * everyone, which no single link or binding can own). Built with the key's own DM scope, so changing
 * `dmScope` moves nothing; only identity links and bindings do.
 */
export function keyNow(entry: SessionEntry, config: ResolvedConfig): string | undefined {
  let parsed;
  try {
    parsed = parseSessionKey(entry.key);
  } catch {
    return undefined;
  }
  if (parsed.subagentId || entry.channel === 'internal' || entry.channel === 'api') return undefined;
  if (parsed.chatType === 'direct' && parsed.dmScope === 'main') return undefined;
  const agentId = agentOf(config.bindings, entry, config.agents[0]?.id ?? 'main');
  try {
    return buildSessionKey(
      { agentId, channel: entry.channel, accountId: entry.accountId, chatType: entry.chatType, peerId: entry.peerId, groupId: entry.groupId, threadId: parsed.threadId, threadKind: parsed.threadKind },
      { dmScope: parsed.dmScope ?? config.session.dmScope, threads: 'separate', identityLinks: config.session.identityLinks },
    );
  } catch {
    return undefined;
  }
}

/**
 * What re-keying would do (SPEC §12), also listed by `switchboard doctor`. Entries bound for the same key
 * merge: the most recently active one continues, the others are archived (never deleted). Deterministic,
 * so a re-run after a crash half-way finds the same plan for what is left.
 */
export async function planRekey(entries: AsyncIterable<SessionEntry>, config: ResolvedConfig): Promise<RekeyMove[]> {
  const byKey = new Map<string, SessionEntry>();
  const moving: { entry: SessionEntry; to: string }[] = [];
  for await (const entry of entries) {
    byKey.set(entry.key, entry);
    const to = keyNow(entry, config);
    if (to && to !== entry.key) moving.push({ entry, to });
  }
  const groups = new Map<string, SessionEntry[]>();
  for (const { entry, to } of moving) groups.set(to, [...(groups.get(to) ?? []), entry]);
  const moves: RekeyMove[] = [];
  for (const [to, sources] of groups) {
    const resident = byKey.get(to);
    const candidates = resident && !sources.some((s) => s.sessionId === resident.sessionId) ? [resident, ...sources] : sources;
    const winner = candidates.reduce((a, b) => (b.updatedAt > a.updatedAt || (b.updatedAt === a.updatedAt && b.key < a.key) ? b : a));
    for (const entry of candidates) {
      const toAgent = parseSessionKey(to).agentId;
      if (entry === resident) {
        if (entry !== winner) moves.push({ from: to, to, sessionId: entry.sessionId, fromAgent: entry.agentId, toAgent: entry.agentId, action: 'archive' });
        continue;
      }
      moves.push({ from: entry.key, to, sessionId: entry.sessionId, fromAgent: entry.agentId, toAgent, action: entry === winner ? 'move' : 'archive' });
    }
  }
  // Archives first: by the time a winner takes a key, whatever it replaces is already kept elsewhere.
  return moves.sort((a, b) => (a.action === b.action ? a.from.localeCompare(b.from) : a.action === 'archive' ? -1 : 1));
}

/** What applying a plan touches. */
export interface RekeyDeps {
  store: SessionStore;
  transcripts: AgentTranscriptStores;
  stateDir: string;
  logger: Logger;
  now: number;
  /** Test hook: called after each step, so a test can stop half-way. */
  afterStep?: (step: string) => void;
}

/**
 * Carries a plan out, each step safe to repeat: a moved transcript is found in its new folder, an entry
 * already written under its new key is not written again, and a source is deleted only once its
 * conversation is stored under the new key (or archived).
 */
export async function applyRekey(moves: readonly RekeyMove[], deps: RekeyDeps): Promise<number> {
  let done = 0;
  for (const move of moves) {
    const entry = await deps.store.get(move.from);
    if (!entry || entry.sessionId !== move.sessionId) continue;
    if (move.action === 'archive') {
      await archiveEntry(entry, deps);
      if (move.from !== move.to) await deps.store.delete(move.from);
      deps.afterStep?.(`archived ${move.from}`);
      deps.logger.info({ from: move.from, mergedInto: move.to, sessionId: move.sessionId }, 'session merged into another by re-keying; archived');
      done++;
      continue;
    }
    await moveTranscript(entry.sessionId, move.toAgent, deps);
    deps.afterStep?.(`transcript ${move.from}`);
    const existing = await deps.store.get(move.to);
    if (existing?.sessionId !== entry.sessionId) {
      const parsed = parseSessionKey(move.to);
      await deps.store.set({ ...entry, key: move.to, agentId: move.toAgent, ...(parsed.parentKey ? { parentKey: parsed.parentKey } : {}) });
    }
    deps.afterStep?.(`entry ${move.to}`);
    await deps.store.delete(move.from);
    deps.afterStep?.(`deleted ${move.from}`);
    deps.logger.info({ from: move.from, to: move.to, sessionId: move.sessionId }, 'session re-keyed (identity links or bindings changed)');
    done++;
  }
  return done;
}

async function moveTranscript(sessionId: string, toAgent: string, deps: RekeyDeps): Promise<void> {
  const target = deps.transcripts.forAgent(toAgent).pathOf(sessionId);
  if (existsSync(target)) return;
  const source = deps.transcripts.pathOf(sessionId);
  if (!existsSync(source)) return;
  deps.transcripts.forget(sessionId);
  await mkdir(path.dirname(target), { recursive: true });
  await rename(source, target);
}

/** Keeps a merged-away conversation: its entry as JSON under `<stateDir>/archive/rekey/`, its transcript renamed `.merged.<UTC>`. */
async function archiveEntry(entry: SessionEntry, deps: RekeyDeps): Promise<void> {
  const dir = path.join(deps.stateDir, 'archive', 'rekey');
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, `${entry.sessionId}.json`), `${JSON.stringify(entry, null, 2)}\n`);
  const transcript = deps.transcripts.pathOf(entry.sessionId);
  if (existsSync(transcript)) {
    deps.transcripts.forget(entry.sessionId);
    await rename(transcript, `${transcript}.merged.${archiveStamp(new Date(deps.now))}`);
  }
}

/** What keys depend on besides the message: a change here is what re-keying looks for. */
export function routingFingerprint(config: ResolvedConfig): string {
  return JSON.stringify({ identityLinks: config.session.identityLinks, bindings: config.bindings, agents: config.agents.map((a) => a.id) });
}
