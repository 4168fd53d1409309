import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../core/logger.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import { JsonlTranscriptStore, type TranscriptEntry, type TranscriptStore } from './transcript.ts';

/** Session ids whose agent is remembered; older ones are looked up again on disk (a stat per agent). */
const MAX_KNOWN = 100_000;

/**
 * Transcripts per agent, `<stateDir>/agents/<agentId>/sessions/<sessionId>.jsonl` (SPEC §4, §12), behind the
 * one `TranscriptStore` API: a transcript is created in the folder of its key's agent, and found again by
 * its session id (remembered, else looked for in each agent's folder).
 */
export class AgentTranscriptStores implements TranscriptStore {
  private readonly stores = new Map<string, JsonlTranscriptStore>();
  private readonly owner = new Map<string, string>();
  private readonly stateDir: string;
  private readonly logger: Logger;
  private readonly defaultAgent: string;
  private readonly handleLimit: number | undefined;

  /** `handleLimit`: files each agent's store keeps open (see {@link JsonlTranscriptStore}). */
  constructor(options: { stateDir: string; agentIds: readonly string[]; logger: Logger; handleLimit?: number }) {
    this.stateDir = options.stateDir;
    this.logger = options.logger;
    this.handleLimit = options.handleLimit;
    this.defaultAgent = options.agentIds[0] ?? 'main';
    const onDisk = existsSync(path.join(this.stateDir, 'agents')) ? readdirSync(path.join(this.stateDir, 'agents')) : [];
    for (const id of new Set([...options.agentIds, ...onDisk])) this.forAgent(id);
  }

  /** The store of one agent's folder. */
  forAgent(agentId: string): JsonlTranscriptStore {
    let store = this.stores.get(agentId);
    if (!store) {
      store = new JsonlTranscriptStore({
        dir: path.join(this.stateDir, 'agents', agentId, 'sessions'), logger: this.logger, ...(this.handleLimit ? { handleLimit: this.handleLimit } : {}),
      });
      this.stores.set(agentId, store);
    }
    return store;
  }

  /** The agent whose folder holds a session id's transcript (the first agent's when none does yet). */
  agentOf(sessionId: string): string {
    const known = this.owner.get(sessionId);
    if (known) return known;
    for (const [agentId, store] of this.stores) {
      if (existsSync(store.pathOf(sessionId))) return this.remember(sessionId, agentId);
    }
    return this.defaultAgent;
  }

  create(sessionId: string, key: string, at: Date): Promise<void> {
    const agentId = this.remember(sessionId, parseSessionKey(key).agentId);
    return this.forAgent(agentId).create(sessionId, key, at);
  }

  append(sessionId: string, entries: TranscriptEntry | TranscriptEntry[]): Promise<void> {
    return this.storeOf(sessionId).append(sessionId, entries);
  }

  read(sessionId: string): Promise<TranscriptEntry[]> {
    return this.storeOf(sessionId).read(sessionId);
  }

  archive(sessionId: string, at: Date): Promise<string | undefined> {
    return this.storeOf(sessionId).archive(sessionId, at);
  }

  async pruneArchives(now: Date, maxAgeMs: number): Promise<number> {
    let deleted = 0;
    for (const store of this.stores.values()) deleted += await store.pruneArchives(now, maxAgeMs);
    return deleted;
  }

  pathOf(sessionId: string): string {
    return this.storeOf(sessionId).pathOf(sessionId);
  }

  forget(sessionId: string): void {
    this.stores.get(this.owner.get(sessionId) ?? '')?.forget(sessionId);
    this.owner.delete(sessionId);
  }

  async close(): Promise<void> {
    await Promise.all([...this.stores.values()].map((s) => s.close()));
  }

  private storeOf(sessionId: string): JsonlTranscriptStore {
    return this.forAgent(this.agentOf(sessionId));
  }

  private remember(sessionId: string, agentId: string): string {
    this.owner.delete(sessionId);
    this.owner.set(sessionId, agentId);
    if (this.owner.size > MAX_KNOWN) this.owner.delete(this.owner.keys().next().value as string);
    return agentId;
  }
}
