import { execFileSync, spawn } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { populateMedia, populateSessions } from './populate.ts';
import { stopChild } from './child.ts';
import { nowMs, percentile, round } from './stats.ts';

const root = path.resolve(import.meta.dirname, '..');

/** How the gateway is started: the compiled build (what `npm start` runs after `npm install`) or the sources through tsx. */
const COMMANDS = {
  compiled: [path.join(root, 'dist/src/cli.js'), 'start'],
  source: ['--import', import.meta.resolve('tsx'), path.join(root, 'src/cli.ts'), 'start'],
} as const;

/** Spawns `switchboard start` on a state folder and measures spawn → first 200 from /healthz. */
async function timeToHealthy(stateDir: string, mode: keyof typeof COMMANDS = 'compiled'): Promise<number> {
  const t0 = nowMs();
  const child = spawn(process.execPath, [...COMMANDS[mode]], {
    cwd: path.dirname(stateDir), env: { PATH: process.env.PATH, SWITCHBOARD_STATE_DIR: stateDir, SWITCHBOARD_PORT: '0', SWITCHBOARD_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        const parsed = JSON.parse(line) as { url?: string };
        if (parsed.url) resolve(parsed.url);
      });
      child.once('exit', (code) => reject(new Error(`gateway exited with ${code}`)));
    });
    for (;;) {
      const ok = await fetch(`${url}/healthz`).then((r) => r.ok, () => false);
      if (ok) return nowMs() - t0;
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    await stopChild(child);
  }
}

/**
 * Start-up time with `stored` sessions, and with `mediaFiles` files in the media store (`data/media`, default
 * 10,000), each against an empty state folder (medians of `runs`).
 */
export async function runStartupBench(options: { dir: string; stored: number; runs: number; mediaFiles?: number }) {
  const mediaFiles = options.mediaFiles ?? 10_000;
  const empty = path.join(options.dir, 'startup-empty', 'data');
  const full = path.join(options.dir, 'startup-full', 'data');
  const withMedia = path.join(options.dir, 'startup-media', 'data');
  for (const dir of [empty, full, withMedia]) await rm(path.dirname(dir), { recursive: true, force: true });
  await mkdir(empty, { recursive: true });
  await populateSessions(path.join(full, 'sessions.sqlite'), options.stored);
  await populateMedia(path.join(withMedia, 'media'), mediaFiles);
  execFileSync(process.execPath, [path.join(root, 'scripts/build.mjs')], { stdio: 'ignore' });
  const emptyRuns: number[] = [];
  const fullRuns: number[] = [];
  const sourceRuns: number[] = [];
  const mediaRuns: number[] = [];
  await timeToHealthy(empty); // warm the file cache
  await timeToHealthy(empty, 'source'); // and tsx's compile cache
  for (let i = 0; i < options.runs; i++) {
    emptyRuns.push(await timeToHealthy(empty));
    // Right after the empty one: after the from-source run (tsx, seconds of CPU) it measured the machine's recovery.
    mediaRuns.push(await timeToHealthy(withMedia));
    fullRuns.push(await timeToHealthy(full));
    sourceRuns.push(await timeToHealthy(full, 'source'));
  }
  const e = percentile(emptyRuns, 50);
  const f = percentile(fullRuns, 50);
  const m = percentile(mediaRuns, 50);
  await rm(path.dirname(full), { recursive: true, force: true });
  await rm(path.dirname(withMedia), { recursive: true, force: true });
  return {
    storedSessions: options.stored, emptyMs: round(e, 0), withSessionsMs: round(f, 0), ratio: round(f / e, 2),
    fromSourceWithSessionsMs: round(percentile(sourceRuns, 50), 0),
    mediaFiles, withMediaMs: round(m, 0), mediaRatio: round(m / e, 2), runs: options.runs,
  };
}
