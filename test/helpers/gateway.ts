import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deepMerge, loadConfig } from '../../src/config/load.ts';
import type { ResolvedConfig } from '../../src/config/resolved.ts';
import type { ChannelAdapter } from '../../src/core/channel-adapter.ts';
import type { Clock } from '../../src/core/clock.ts';
import { silentLogger, type Logger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway, type StartOptions } from '../../src/main.ts';

/** A fresh temporary folder; remove it with the returned function. */
export function tempDir(prefix = 'switchboard-test-'): { dir: string; remove: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A config built from an object, as if it were the config file, with no environment and no .env. */
export function testConfig(dir: string, overrides: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = {}): ResolvedConfig {
  const base: Record<string, unknown> = { stateDir: path.join(dir, 'data'), gateway: { port: 0 }, logLevel: 'silent', agents: { defaults: { workspace: path.join(dir, 'workspace') } } };
  deepMerge(base, structuredClone(overrides));
  return loadConfig({ cwd: dir, env, dotenv: false, overrides: base });
}

/** Starts a gateway in-process on a free port with a temporary state folder. */
export async function startTestGateway(options: {
  dir: string;
  config?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  clock?: Clock;
  adapters?: ChannelAdapter[];
  logger?: Logger;
  /** The wait after a poll that brought nothing readable (default: the product's, 1 s doubling to 30 s). */
  pollBackoff?: { baseMs?: number; maxMs?: number };
  /** Timers of the queue mode `collect` debounce. */
  queueTimers?: StartOptions['queueTimers'];
  /** Timers of media download deadlines. */
  mediaTimers?: StartOptions['mediaTimers'];
  /** Timers of job due times and heartbeats. */
  schedulerTimers?: StartOptions['schedulerTimers'];
}): Promise<RunningGateway> {
  const config = testConfig(options.dir, options.config, options.env);
  const gw = await startGateway({
    config, clock: options.clock, logger: options.logger ?? silentLogger(), adapters: options.adapters,
    ...(options.pollBackoff ? { pollBackoff: options.pollBackoff } : {}),
    ...(options.queueTimers ? { queueTimers: options.queueTimers } : {}),
    ...(options.mediaTimers ? { mediaTimers: options.mediaTimers } : {}),
    ...(options.schedulerTimers ? { schedulerTimers: options.schedulerTimers } : {}),
  });
  // Channels connect in the background; tests start from the outcome of each channel's first attempt.
  await gw.supervisor.firstAttempts();
  return gw;
}
