import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/gateway.ts';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

/** Runs a script in a process of its own (an uncaught error there must not reach the test runner). */
async function runScript(body: string): Promise<{ stdout: string; lines: Record<string, unknown>[] }> {
  const tmp = tempDir('switchboard-guard-');
  try {
    const file = path.join(tmp.dir, 'script.ts');
    writeFileSync(file, body.replaceAll('@src', path.join(root, 'src')));
    const { stdout } = await run(process.execPath, ['--import', 'tsx', file], { cwd: root, timeout: 20_000 });
    const lines = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    return { stdout, lines };
  } finally {
    tmp.remove();
  }
}

describe('process guard', () => {
  it('logs an uncaught exception and an unhandled rejection with the channel and correlation id, and the process goes on', async () => {
    const { stdout, lines } = await runScript(`
      import { createLogger } from '@src/core/logger.ts';
      import { runWithLogContext } from '@src/core/log-context.ts';
      import { installProcessGuard } from '@src/core/process-guard.ts';
      installProcessGuard(createLogger({ secrets: ['secret-value-123'] }));
      runWithLogContext({ channel: 'discord', accountId: 'default', correlationId: 'corr-1' }, () => {
        setTimeout(() => { throw Object.assign(new Error('boom with secret-value-123'), { code: 'E_BOOM' }); }, 1);
        setTimeout(() => { void Promise.reject(new Error('rejected')); }, 5);
      });
      setTimeout(() => console.log('still serving'), 50);
    `);
    expect(stdout).toContain('still serving');
    const [exception, rejection] = lines;
    expect(exception).toMatchObject({ level: 50, channel: 'discord', accountId: 'default', correlationId: 'corr-1', guard: 'uncaught exception', err: { message: 'boom with [redacted]', code: 'E_BOOM' } });
    expect(String(exception!.msg)).toContain('in channel discord');
    expect((exception!.err as { stack: string }).stack).toContain('boom with [redacted]');
    expect(rejection).toMatchObject({ level: 50, channel: 'discord', correlationId: 'corr-1', guard: 'unhandled rejection', err: { message: 'rejected' } });
    expect(stdout).not.toContain('secret-value-123');
  }, 30_000);

  it('is gone once uninstalled: Node then stops on an uncaught exception as usual', async () => {
    const failure = await runScript(`
      import { createLogger } from '@src/core/logger.ts';
      import { installProcessGuard } from '@src/core/process-guard.ts';
      const uninstall = installProcessGuard(createLogger());
      uninstall();
      setTimeout(() => { throw new Error('boom'); }, 1);
      setTimeout(() => console.log('still serving'), 50);
    `).catch((error: unknown) => error as { code: number; stdout: string });
    expect((failure as { code: number }).code).toBe(1);
    expect((failure as { stdout: string }).stdout).not.toContain('still serving');
  }, 30_000);
});
