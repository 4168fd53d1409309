import { appendFile, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import sqlite3 from 'sqlite3';
import { ManualClock } from '../src/core/clock.ts';
import { silentLogger } from '../src/core/logger.ts';
import { SessionManager } from '../src/sessions/manager.ts';
import { KeyvSessionStore } from '../src/sessions/store.ts';
import { JsonlTranscriptStore, type TranscriptMessage } from '../src/sessions/transcript.ts';
import { populateSessions, sampleEntry } from './populate.ts';
import { mean, nowMs, percentile, round } from './stats.ts';

/** Per-turn persistence cost at one store size. */
export interface StoreLevel {
  storedSessions: number;
  populateSeconds: number;
  gateway: { meanUs: number; p99Us: number };
  raw: { meanUs: number; p99Us: number };
  /** gateway mean / raw mean. */
  ratio: number;
}

function query(db: sqlite3.Database, sql: string, ...params: unknown[]): Promise<void> {
  return new Promise((resolve, reject) => db.run(sql, params, (e) => (e ? reject(e) : resolve())));
}

/**
 * Per-turn persistence (entry update + transcript append) with N sessions already stored: the gateway's
 * SessionManager.save + JsonlTranscriptStore.append, against the raw work (one SQLite upsert of the same
 * serialized entry on its own connection, one JSONL append). Turns alternate between the two.
 */
export async function runStoreBench(options: { dir: string; sizes: number[]; turns: number }): Promise<StoreLevel[]> {
  const levels: StoreLevel[] = [];
  for (const size of options.sizes) {
    const dir = path.join(options.dir, `store-${size}`);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, 'sessions.sqlite');
    const t0 = nowMs();
    await populateSessions(file, size);
    const populateSeconds = (nowMs() - t0) / 1000;

    const store = await KeyvSessionStore.open(`sqlite://${file}`);
    const transcripts = new JsonlTranscriptStore({ dir: path.join(dir, 'transcripts'), logger: silentLogger(), cacheLimit: 0 });
    const manager = new SessionManager({ store, transcripts, clock: new ManualClock(), logger: silentLogger(), maxActiveSessions: 10_000, expiresAt: () => Infinity });
    const raw = new sqlite3.Database(file);
    await query(raw, 'PRAGMA journal_mode=WAL');
    await query(raw, 'PRAGMA synchronous=NORMAL');
    await query(raw, 'PRAGMA busy_timeout=5000');
    const gatewayUs: number[] = [];
    const rawUs: number[] = [];
    for (let t = 0; t < options.turns; t++) {
      const i = Math.floor(Math.random() * size);
      const entry = sampleEntry(i);
      const line: TranscriptMessage = { type: 'message', id: `m${t}`, role: 'assistant', content: 'Sure: here is a short answer.', at: new Date().toISOString() };
      const a = nowMs();
      await manager.save(entry);
      await transcripts.append(entry.sessionId, line);
      gatewayUs.push((nowMs() - a) * 1000);

      const rawEntry = sampleEntry(i);
      const b = nowMs();
      const value = JSON.stringify({ value: rawEntry, expires: null });
      await query(raw, 'INSERT INTO keyv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value', `sessions:${rawEntry.key}`, value);
      await appendFile(path.join(dir, 'transcripts', `${rawEntry.sessionId}.jsonl`), `${JSON.stringify(line)}\n`);
      rawUs.push((nowMs() - b) * 1000);
    }
    await new Promise<void>((resolve) => raw.close(() => resolve()));
    await store.close();
    const g = { meanUs: round(mean(gatewayUs), 1), p99Us: round(percentile(gatewayUs, 99), 1) };
    const r = { meanUs: round(mean(rawUs), 1), p99Us: round(percentile(rawUs, 99), 1) };
    levels.push({ storedSessions: size, populateSeconds: round(populateSeconds, 1), gateway: g, raw: r, ratio: round(g.meanUs / r.meanUs, 2) });
    await rm(dir, { recursive: true, force: true });
  }
  return levels;
}
