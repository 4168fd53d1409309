import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { stopChild } from './child.ts';
import { nowMs, percentile, round } from './stats.ts';

const root = path.resolve(import.meta.dirname, '..');
const CHANNELS = ['telegram', 'discord', 'slack', 'api', 'webchat'];

/** The session key that has three records at the very start of the ledger: the worst case of a timeline. */
export const RARE_KEY = 'agent:main:telegram:direct:rare';
/** A session key with records all along the ledger (one in `sessions`): its last 100 are spread over every archive. */
export const COMMON_KEY = 'agent:main:discord:direct:user-6';

/** Writes a ledger of `records` LLM calls over `sessions` keys (about 490 bytes a line, like real ones). */
export async function writeLedger(file: string, records: number, sessions = 3000): Promise<number> {
  await mkdir(path.dirname(file), { recursive: true });
  const out = createWriteStream(file);
  const t0 = Date.UTC(2025, 0, 1);
  for (let i = 0; i < records; i++) {
    const key = i < 3 ? RARE_KEY : `agent:main:${CHANNELS[i % 5]}:direct:user-${i % sessions}`;
    const line = `${JSON.stringify({
      correlationId: `0f9c2d1e-7b3a-4c5d-9e8f-${String(i).padStart(12, '0')}`, sessionKey: key, sessionId: `5a7b9c1d-2e3f-4a5b-8c9d-${String(i % sessions).padStart(12, '0')}`,
      channel: CHANNELS[i % 5], agentId: 'main', providerId: 'default', modelId: i % 4 ? 'gpt-4o-mini' : 'gpt-4o',
      inputTokens: 1200 + (i % 700), outputTokens: 150 + (i % 90), cacheReadTokens: i % 3 ? 1024 : 0, cacheWriteTokens: 0,
      estimatedInputTokensByComponent: { system: 420, bootstrap: 300, tools: 150, history: 600 + (i % 500), toolResults: 0, userInput: 40 + (i % 60) },
      isEstimated: false, kind: i % 50 ? 'turn' : 'compaction', timestamp: new Date(t0 + i * 30_000).toISOString(),
    })}\n`;
    if (!out.write(line)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return (await stat(file)).size;
}

interface Running {
  url: string;
  child: ChildProcess;
  healthyMs: number;
}

/** Spawns the compiled `switchboard start` on a state folder; resolves once /healthz answers. */
async function startGateway(stateDir: string): Promise<Running> {
  const t0 = nowMs();
  const child = spawn(process.execPath, [path.join(root, 'dist/src/cli.js'), 'start'], {
    cwd: path.dirname(stateDir), env: { PATH: process.env.PATH, SWITCHBOARD_STATE_DIR: stateDir, SWITCHBOARD_PORT: '0', SWITCHBOARD_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const parsed = JSON.parse(line) as { url?: string };
      if (parsed.url) resolve(parsed.url);
    });
    child.once('exit', (code) => reject(new Error(`gateway exited with ${code}`)));
  });
  for (;;) {
    if (await fetch(`${url}/healthz`).then((r) => r.ok, () => false)) return { url, child, healthyMs: nowMs() - t0 };
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Waits (at most 2 minutes) until the audit folder holds compressed archives and no uncompressed one. */
async function archivesCompressed(audit: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const names = await readdir(audit);
    const archives = names.filter((n) => n !== 'turn-token-usage.jsonl' && /\.jsonl(\.gz)?$/.test(n));
    if (archives.length && archives.every((n) => n.endsWith('.gz')) && !names.some((n) => n.endsWith('.tmp') || n.endsWith('.part'))) return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function timed(url: string): Promise<number> {
  const t0 = nowMs();
  const response = await fetch(url);
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return nowMs() - t0;
}

/**
 * Start-up with a big token ledger against an empty state folder (spawn → /healthz, compiled build), and
 * how fast `/usage` and the timeline of a key with few records answer once it runs.
 */
export async function runLedgerBench(options: { dir: string; records: number; runs: number }) {
  const empty = path.join(options.dir, 'ledger-empty', 'data');
  const full = path.join(options.dir, 'ledger-full', 'data');
  await rm(path.dirname(empty), { recursive: true, force: true });
  await rm(path.dirname(full), { recursive: true, force: true });
  await mkdir(empty, { recursive: true });
  const bytes = await writeLedger(path.join(full, 'audit', 'turn-token-usage.jsonl'), options.records);
  execFileSync(process.execPath, [path.join(root, 'scripts/build.mjs')], { stdio: 'ignore' });
  await stopChild((await startGateway(empty)).child); // warm the file cache

  // First start on the old ledger: no snapshot yet; the history is read in the background.
  const first = await startGateway(full);
  const usageWaitMs = await timed(`${first.url}/usage`);
  const firstTimelineMs = await timed(`${first.url}/admin/sessions/${encodeURIComponent(COMMON_KEY)}/timeline?limit=100`);
  // Then it is rotated (split into archives of the usual size) and compressed in the background: let that end,
  // so that the measured starts are those of a gateway in its steady state.
  await archivesCompressed(path.join(full, 'audit'));
  await stopChild(first.child);

  const emptyRuns: number[] = [];
  const fullRuns: number[] = [];
  for (let i = 0; i < options.runs; i++) {
    for (const [dir, runs] of [[empty, emptyRuns], [full, fullRuns]] as const) {
      const running = await startGateway(dir);
      runs.push(running.healthyMs);
      await stopChild(running.child);
    }
  }
  const steady = await startGateway(full);
  const usageMs: number[] = [];
  const timelineMs: number[] = [];
  const commonMs: number[] = [];
  for (let i = 0; i < 5; i++) {
    usageMs.push(await timed(`${steady.url}/usage`));
    timelineMs.push(await timed(`${steady.url}/admin/sessions/${encodeURIComponent(RARE_KEY)}/timeline?limit=100`));
    commonMs.push(await timed(`${steady.url}/admin/sessions/${encodeURIComponent(COMMON_KEY)}/timeline?limit=100`));
  }
  await stopChild(steady.child);
  const e = percentile(emptyRuns, 50);
  const f = percentile(fullRuns, 50);
  await rm(path.dirname(full), { recursive: true, force: true });
  await rm(path.dirname(empty), { recursive: true, force: true });
  return {
    records: options.records, ledgerMB: round(bytes / 1_048_576, 0), emptyMs: round(e, 0), withLedgerMs: round(f, 0), ratio: round(f / e, 2),
    firstStartMs: round(first.healthyMs, 0), firstUsageWaitMs: round(usageWaitMs, 0), firstCommonTimelineMs: round(firstTimelineMs, 0),
    usageMs: round(percentile(usageMs, 50), 1), rareTimelineMs: round(percentile(timelineMs, 50), 1), commonTimelineMs: round(percentile(commonMs, 50), 1), runs: options.runs,
  };
}
