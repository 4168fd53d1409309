import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, open, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedConfig } from '../config/resolved.ts';
import type { Logger } from '../core/logger.ts';
import { agentOf } from '../routing/bindings.ts';
import { buildSessionKey, parseSessionKey } from '../routing/session-key.ts';
import type { AgentTranscriptStores } from '../sessions/agent-transcripts.ts';
import type { SessionEntry } from '../sessions/entry.ts';
import { allSessions } from '../sessions/scan.ts';
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
  /** Set on the first half of a cycle's move: `to` is a temporary key, left again by a later move. */
  temporary?: true;
  /** Set on the second half: the key the conversation had before it was parked under `from`. */
  parkedFrom?: string;
}

/**
 * The key an entry would get today, or undefined to leave it alone: sub-agent and internal sessions and the
 * API's (their agent is the caller's choice). Built with the key's own DM scope, so changing `dmScope` moves
 * nothing; only identity links and bindings do. A `dmScope: "main"` conversation follows the binding of the
 * channel, account and peer it was started from (identity links do not apply under `main`).
 */
export function keyNow(entry: SessionEntry, config: ResolvedConfig): string | undefined {
  let parsed;
  try {
    parsed = parseSessionKey(entry.key);
  } catch {
    return undefined;
  }
  if (parsed.subagentId || entry.channel === 'internal' || entry.channel === 'api') return undefined;
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
 * merge: the most recently active one continues, the others are archived (never deleted). An entry already at
 * a target key takes part in the merge only when it stays there; one that moves away itself frees the key.
 * Moves are ordered so that a key is vacated before another entry moves in; a cycle (two identity links
 * swapped) goes through a temporary key. Deterministic, so a re-run after a crash half-way finds the same plan
 * for what is left.
 */
export async function planRekey(entries: AsyncIterable<SessionEntry>, config: ResolvedConfig): Promise<RekeyMove[]> {
  const byKey = new Map<string, SessionEntry>();
  const targets = new Map<string, string>();
  const moving: { entry: SessionEntry; to: string }[] = [];
  for await (const entry of entries) {
    byKey.set(entry.key, entry);
    const to = keyNow(entry, config);
    if (to && to !== entry.key) {
      moving.push({ entry, to });
      targets.set(entry.key, to);
    }
  }
  const groups = new Map<string, SessionEntry[]>();
  for (const { entry, to } of moving) groups.set(to, [...(groups.get(to) ?? []), entry]);
  const archives: RekeyMove[] = [];
  const moves: RekeyMove[] = [];
  for (const [to, sources] of groups) {
    const atTarget = byKey.get(to);
    const resident = atTarget && !targets.has(to) ? atTarget : undefined;
    const candidates = resident ? [resident, ...sources] : sources;
    const winner = candidates.reduce((a, b) => (b.updatedAt > a.updatedAt || (b.updatedAt === a.updatedAt && b.key < a.key) ? b : a));
    const toAgent = parseSessionKey(to).agentId;
    for (const entry of candidates) {
      // Several copies of one session id are one conversation (a crash between writing the new key and deleting the old one).
      const continues = entry.sessionId === winner.sessionId;
      if (entry === resident) {
        if (!continues) archives.push({ from: to, to, sessionId: entry.sessionId, fromAgent: entry.agentId, toAgent: entry.agentId, action: 'archive' });
        continue;
      }
      (continues ? moves : archives).push({ from: entry.key, to, sessionId: entry.sessionId, fromAgent: entry.agentId, toAgent, action: continues ? 'move' : 'archive' });
    }
  }
  // Archives first: by the time a winner takes a key, whatever it replaces is already kept elsewhere.
  archives.sort((a, b) => a.from.localeCompare(b.from));
  return [...archives, ...orderMoves(moves.sort((a, b) => a.from.localeCompare(b.from) || a.to.localeCompare(b.to)))];
}

/**
 * Orders moves so that the move out of a key runs before any move into it. When only a cycle is left, its first
 * move goes to a temporary key (which the next plan would send on to the same target) and continues from there.
 */
function orderMoves(pending: RekeyMove[]): RekeyMove[] {
  const ordered: RekeyMove[] = [];
  while (pending.length) {
    const leaving = new Set(pending.map((m) => m.from));
    const ready = pending.filter((m) => !leaving.has(m.to));
    if (ready.length) {
      ordered.push(...ready);
      pending = pending.filter((m) => leaving.has(m.to));
      continue;
    }
    const [first, ...rest] = pending as [RekeyMove, ...RekeyMove[]];
    const parked = temporaryKey(first);
    ordered.push({ ...first, to: parked, toAgent: first.fromAgent, temporary: true });
    pending = [{ ...first, from: parked, parkedFrom: first.from }, ...rest];
  }
  return ordered;
}

/** A key no conversation has: the target key under a made-up agent id named after the session id. */
function temporaryKey(move: RekeyMove): string {
  const p = parseSessionKey(move.to);
  return buildSessionKey(
    { agentId: `rekey-${move.sessionId}`, channel: p.channel ?? 'internal', accountId: p.accountId ?? 'default', chatType: p.chatType, peerId: p.peerId ?? 'main', groupId: p.groupId, threadId: p.threadId, threadKind: p.threadKind },
    { dmScope: p.dmScope ?? 'per-peer', threads: 'separate', identityLinks: {} },
  );
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
 * conversation is stored under the new key (or archived), and its spawned children point to the new key.
 */
export async function applyRekey(moves: readonly RekeyMove[], deps: RekeyDeps): Promise<number> {
  if (!moves.length) return 0;
  const children = new Map<string, string[]>();
  for await (const e of allSessions(deps.store)) if (e.parentKey && e.key.includes(':subagent:')) children.set(e.parentKey, [...(children.get(e.parentKey) ?? []), e.key]);
  let done = 0;
  for (const move of moves) {
    const entry = await deps.store.get(move.from);
    if (!entry || entry.sessionId !== move.sessionId) continue;
    if (move.action === 'archive') {
      await archiveEntry(entry, deps);
      deps.afterStep?.(`archive ${move.from}`);
      if (move.from !== move.to) await deps.store.delete(move.from);
      deps.afterStep?.(`archived ${move.from}`);
      deps.logger.info({ from: move.from, mergedInto: move.to, sessionId: move.sessionId }, 'session merged into another by re-keying; archived');
      done++;
      continue;
    }
    warnIfShared(entry, move, deps.logger);
    await moveTranscript(entry.sessionId, move.toAgent, move.temporary ? undefined : move.to, deps);
    deps.afterStep?.(`transcript ${move.from}`);
    const existing = await deps.store.get(move.to);
    if (existing?.sessionId !== entry.sessionId) {
      const parsed = parseSessionKey(move.to);
      await deps.store.set({ ...entry, key: move.to, agentId: move.toAgent, ...(parsed.parentKey ? { parentKey: parsed.parentKey } : {}) });
    }
    deps.afterStep?.(`entry ${move.to}`);
    for (const key of children.get(move.from) ?? []) {
      const child = await deps.store.get(key);
      if (child?.parentKey === move.from) await deps.store.set({ ...child, parentKey: move.to });
    }
    children.set(move.to, [...(children.get(move.to) ?? []), ...(children.get(move.from) ?? [])]);
    deps.afterStep?.(`children ${move.from}`);
    await deps.store.delete(move.from);
    deps.afterStep?.(`deleted ${move.from}`);
    deps.logger.info({ from: move.from, to: move.to, sessionId: move.sessionId }, 'session re-keyed (identity links or bindings changed)');
    done++;
  }
  return done;
}

/** A `dmScope: "main"` conversation is one for every channel; it follows the channel it was started from. */
function warnIfShared(entry: SessionEntry, move: RekeyMove, logger: Logger): void {
  const last = entry.deliveryTarget;
  if (parseSessionKey(move.from).dmScope !== 'main' || !last || (last.channel === entry.channel && last.accountId === entry.accountId)) return;
  logger.warn(
    { from: move.from, to: move.to, startedOn: `${entry.channel}:${entry.accountId}`, lastUsedOn: `${last.channel}:${last.accountId}` },
    'the dmScope "main" session was shared by several channels; it moves with the channel it was started from, so the other channels begin a new conversation under their own agent',
  );
}

async function moveTranscript(sessionId: string, toAgent: string, toKey: string | undefined, deps: RekeyDeps): Promise<void> {
  const target = deps.transcripts.forAgent(toAgent).pathOf(sessionId);
  if (!existsSync(target)) {
    const source = deps.transcripts.pathOf(sessionId);
    if (!existsSync(source)) return;
    deps.transcripts.forget(sessionId);
    await mkdir(path.dirname(target), { recursive: true });
    await rename(source, target);
  }
  deps.transcripts.forget(sessionId);
  if (toKey) await rewriteHeaderKey(target, toKey);
}

/** The header names the key the transcript belongs to (and, in `formerKeys`, those it had); written to a side file and renamed over, so a crash leaves one or the other. */
async function rewriteHeaderKey(file: string, key: string): Promise<void> {
  const text = await readFile(file, 'utf8');
  const newline = text.indexOf('\n');
  const first = newline < 0 ? text : text.slice(0, newline);
  let header: { type?: string; key?: string; formerKeys?: string[] };
  try {
    header = JSON.parse(first) as typeof header;
  } catch {
    return;
  }
  if (header.type !== 'session' || header.key === key) return;
  const side = `${file}.rekey`;
  // The keys it had before stay in the header: the ledger's records of those turns are filed under them.
  const formerKeys = [...(header.formerKeys ?? []), ...(header.key ? [header.key] : [])];
  await writeFile(side, `${JSON.stringify({ ...header, key, formerKeys })}${newline < 0 ? '\n' : text.slice(newline)}`);
  await rename(side, file);
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

/** The keys a moved transcript had before (its header's `formerKeys`); none when it never moved or is not there. */
export async function formerKeysOf(file: string): Promise<string[]> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch {
    return [];
  }
  try {
    const buffer = Buffer.alloc(64 * 1024);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const first = buffer.subarray(0, bytesRead).toString('utf8').split('\n')[0] ?? '';
    const header = JSON.parse(first) as { type?: string; formerKeys?: unknown };
    return header.type === 'session' && Array.isArray(header.formerKeys) ? header.formerKeys.filter((k): k is string => typeof k === 'string') : [];
  } catch {
    return [];
  } finally {
    await handle.close();
  }
}

/** What keys depend on besides the message: a change here is what re-keying looks for. */
export function routingFingerprint(config: ResolvedConfig): string {
  return JSON.stringify({ identityLinks: config.session.identityLinks, bindings: config.bindings, agents: config.agents.map((a) => a.id) });
}

/**
 * SPEC §12: when `identityLinks` or `bindings` changed since the last start, entries that would now get
 * another key move there with their transcripts before any message is routed. The fingerprint is written
 * only once every move is done, so a crash half-way repeats the (idempotent) moves at the next start.
 */
export async function rekeyIfRoutingChanged(config: ResolvedConfig, store: SessionStore, transcripts: AgentTranscriptStores, logger: Logger, now: number, hooks?: Pick<RekeyDeps, 'afterStep'>): Promise<void> {
  const file = path.join(config.stateDir, 'routing.json');
  const fingerprint = routingFingerprint(config);
  // No file: a state folder from before bindings, whose routing is unknown, so every entry is checked as after a change.
  const previous = existsSync(file) ? readFileSync(file, 'utf8') : undefined;
  if (previous === fingerprint) return;
  const moves = await planRekey(allSessions(store), config);
  if (moves.length) logger.info({ moves: moves.length }, 'identity links or bindings changed: re-keying sessions');
  await applyRekey(moves, { store, transcripts, stateDir: config.stateDir, logger, now, afterStep: hooks?.afterStep });
  writeFileSync(file, fingerprint);
}
