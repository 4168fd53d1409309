import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ManualClock } from '../src/core/clock.ts';
import { silentLogger } from '../src/core/logger.ts';
import { SessionManager } from '../src/sessions/manager.ts';
import { KeyvSessionStore } from '../src/sessions/store.ts';
import { JsonlTranscriptStore } from '../src/sessions/transcript.ts';
import { sampleEntry } from './populate.ts';
import { round } from './stats.ts';

const gc = () => { (globalThis as { gc?: () => void }).gc?.(); };

/** Resident memory per idle active session: RSS and heap delta over `count` admitted sessions, divided. */
export async function runMemoryBench(options: { dir: string; count: number }) {
  const dir = path.join(options.dir, 'memory');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const store = await KeyvSessionStore.open(`sqlite://${path.join(dir, 'sessions.sqlite')}`);
  const transcripts = new JsonlTranscriptStore({ dir: path.join(dir, 't'), logger: silentLogger() });
  const make = () => new SessionManager({ store, transcripts, clock: new ManualClock(), logger: silentLogger(), maxActiveSessions: options.count + 1, expiresAt: () => Infinity });
  // Warm up the code paths (JIT, SQLite statements) on a throwaway manager so that they are not counted.
  const warm = make();
  for (let i = 0; i < 500; i++) await warm.admit({ ...sampleEntry(1_000_000 + i) });
  warm.evictAll();
  const manager = make();
  gc(); gc();
  const before = process.memoryUsage();
  for (let i = 0; i < options.count; i++) {
    const session = await manager.admit({ ...sampleEntry(i) });
    Object.assign(session.entry, { tokens: { input: 1234, output: 456, cacheRead: 0, cacheWrite: 0 }, messageCount: 6, deliveryTarget: sampleEntry(i).deliveryTarget });
  }
  gc(); gc();
  const after = process.memoryUsage();
  // Read the manager after the measurement so the collector cannot treat the sessions as garbage.
  const active = manager.size;
  const entryJsonBytes = Buffer.byteLength(JSON.stringify(sampleEntry(0)));
  const rssPerSession = (after.rss - before.rss) / options.count;
  const heapPerSession = (after.heapUsed - before.heapUsed) / options.count;
  await store.close();
  await rm(dir, { recursive: true, force: true });
  return {
    sessions: active, gcExposed: typeof (globalThis as { gc?: unknown }).gc === 'function',
    rssBytesPerSession: round(rssPerSession, 0), heapBytesPerSession: round(heapPerSession, 0), entryJsonBytes,
    heapToJsonRatio: round(heapPerSession / entryJsonBytes, 2),
  };
}
