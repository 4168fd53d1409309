import { spawn } from 'node:child_process';
import { afterEach } from 'vitest';
import path from 'node:path';
import { createInterface } from 'node:readline';

/** The `switchboard` command of this checkout. */
export const bin = path.resolve(import.meta.dirname, '../../bin/switchboard.mjs');

/** A minimal environment: PATH, HOME in the test folder, and what the test adds. */
export const cleanEnv = (dir: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: dir, ...extra });

/** `switchboard start` as a real process on a free port; `url` resolves once it logs that it runs. */
export function startProcess(dir: string, env: NodeJS.ProcessEnv = {}, binPath: string = bin) {
  const child = spawn(process.execPath, [binPath, 'start'], { cwd: dir, env: cleanEnv(dir, { SWITCHBOARD_PORT: '0', ...env }), stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const url = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      try {
        const parsed = JSON.parse(line) as { msg?: string; url?: string };
        if (parsed.msg === 'Switchboard is running' && parsed.url) resolve(parsed.url);
      } catch { /* not a JSON log line */ }
    });
    child.once('exit', (code) => reject(new Error(`exited with ${code}: ${lines.join('\n')}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, url, lines, exited };
}

/** Gateway processes a test starts with `start`, each killed with SIGKILL (and waited for) after the test. */
export function useGatewayProcesses(): { start(dir: string, env?: NodeJS.ProcessEnv): ReturnType<typeof startProcess> } {
  const started: ReturnType<typeof startProcess>[] = [];
  afterEach(async () => {
    for (const p of started.splice(0)) {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  });
  return {
    start(dir, env) {
      const proc = startProcess(dir, env);
      started.push(proc);
      return proc;
    },
  };
}
