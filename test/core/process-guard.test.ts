import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/gateway.ts';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

/** Runs a script in a process of its own (an uncaught error there must not reach the test runner). */
async function runScript(body: string, env: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string; lines: Record<string, unknown>[] }> {
  const tmp = tempDir('switchboard-guard-');
  try {
    const file = path.join(tmp.dir, 'script.ts');
    writeFileSync(file, body.replaceAll('@src', path.join(root, 'src')));
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', file], { cwd: root, timeout: 20_000, env: { ...process.env, ...env } });
    const lines = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    return { stdout, stderr, lines };
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

  it('never ends the process itself: values that throw when printed or read are still reported', async () => {
    const { stdout, stderr, lines } = await runScript(`
      import { createLogger } from '@src/core/logger.ts';
      import { installProcessGuard } from '@src/core/process-guard.ts';
      installProcessGuard(createLogger({ secrets: ['secret-value-123'] }));
      const hostile = { get message() { throw new Error('getter'); }, get stack() { throw new Error('getter'); } };
      setTimeout(() => { throw Object.create(null); }, 1);
      setTimeout(() => { void Promise.reject(hostile); }, 5);
      setTimeout(() => { const e = new Error('fine'); Object.defineProperty(e, 'boom', { enumerable: true, get() { throw new Error('getter'); } }); throw e; }, 10);
      setTimeout(() => console.log('still serving'), 60);
    `);
    expect(stdout).toContain('still serving');
    const reported = [...lines, ...stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)];
    expect(reported.filter((l) => l.guard === 'uncaught exception')).toHaveLength(2);
    expect(reported.filter((l) => l.guard === 'unhandled rejection')).toHaveLength(1);
  }, 30_000);

  it('writes to stderr, scrubbed, when the logger cannot write the line', async () => {
    const telegramToken = '123456789:AAHfakefakefakefakefakefakefakefake12';
    const { stdout, stderr } = await runScript(`
      import { installProcessGuard } from '@src/core/process-guard.ts';
      const broken = { error() { throw new Error('the log destination is gone'); } };
      installProcessGuard(broken as never, ['configured-secret-456']);
      function leaky() { throw new Error('failed with ${telegramToken} and configured-secret-456 and ' + process.env.SLACK_SIGNING_SECRET); }
      setTimeout(leaky, 1);
      setTimeout(() => console.log('still serving'), 50);
    `, { SLACK_SIGNING_SECRET: 'env-signing-secret-789' });
    expect(stdout).toContain('still serving');
    const line = JSON.parse(stderr.split('\n').find((l) => l.startsWith('{'))!) as { msg: string; error: string; guard: string };
    expect(line.guard).toBe('uncaught exception');
    expect(line.error).toContain('leaky (');
    expect(line.msg).toBe('uncaught exception: failed with [redacted] and [redacted] and [redacted]; the gateway keeps serving');
    for (const secret of [telegramToken, 'configured-secret-456', 'env-signing-secret-789']) expect(stderr).not.toContain(secret);
  }, 30_000);
});
