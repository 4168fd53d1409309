import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.ts';
import { PairingStore } from '../../src/routing/pairing.ts';
import { bin, cleanEnv as baseEnv, startProcess as startGatewayProcess } from '../helpers/process.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const run = promisify(execFile);
const cleanEnv = (dir: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => baseEnv(dir, { SWITCHBOARD_LOG_LEVEL: 'info', ...extra });
const startProcess = (dir: string, env: NodeJS.ProcessEnv = {}) => startGatewayProcess(dir, { SWITCHBOARD_LOG_LEVEL: 'info', ...env });


describe('switchboard command line', () => {
  const tmp = useTempDir();

  it('start serves /healthz and the web chat with the offline provider, then stops cleanly on SIGTERM; sessions --json lists the chat', async () => {
    const proc = startProcess(tmp.dir);
    const url = await proc.url;
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ ok: true });
    const reply = await (await fetch(`${url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text: 'hello' }) })).json() as { sessionKey: string; sessionId: string; reply: string };
    expect(reply.reply).toMatch(/offline/);
    // Listing works while the gateway runs.
    const listed = JSON.parse((await run(process.execPath, [bin, 'sessions', '--json'], { cwd: tmp.dir, env: cleanEnv(tmp.dir) })).stdout) as { sessions: { key: string; sessionId: string }[] };
    expect(listed.sessions).toEqual([expect.objectContaining({ key: 'agent:main:main', sessionId: reply.sessionId })]);
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
    expect(proc.lines.some((l) => l.includes('"msg":"stopped"'))).toBe(true);
    const text = (await run(process.execPath, [bin, 'sessions', '--channel', 'webchat'], { cwd: tmp.dir, env: cleanEnv(tmp.dir) })).stdout;
    expect(text).toContain('agent:main:main');
    expect(text).toContain(reply.sessionId);
  }, 30_000);

  it('an invalid config stops start with the key named and a non-zero exit', async () => {
    const result = await run(process.execPath, [bin, 'start'], { cwd: tmp.dir, env: cleanEnv(tmp.dir, { SWITCHBOARD_PORT: 'abc' }) }).catch((e: { code: number; stderr: string }) => e);
    expect((result as { code: number }).code).toBe(1);
    expect((result as { stderr: string }).stderr).toMatch(/gateway\.port \(from SWITCHBOARD_PORT\)/);
  });

  it('pairing list / approve / revoke work on the store file', async () => {
    const store = new PairingStore({ uri: `sqlite://${path.join(tmp.dir, 'data', 'sessions.sqlite')}`, clock: new ManualClock(Date.now()) });
    const outcome = await store.request('telegram', 'default', '42', 'Alice');
    await store.close();
    if (outcome.status === 'full') throw new Error('unexpected');
    const env = cleanEnv(tmp.dir);
    expect((await run(process.execPath, [bin, 'pairing', 'list'], { cwd: tmp.dir, env })).stdout).toContain(outcome.request.code);
    expect((await run(process.execPath, [bin, 'pairing', 'approve', 'telegram', outcome.request.code], { cwd: tmp.dir, env })).stdout).toMatch(/Approved telegram peer 42/);
    const listed = JSON.parse((await run(process.execPath, [bin, 'pairing', 'list', '--json'], { cwd: tmp.dir, env })).stdout) as { pending: unknown[]; paired: { peerId: string }[] };
    expect(listed.pending).toEqual([]);
    expect(listed.paired.map((p) => p.peerId)).toEqual(['42']);
    expect((await run(process.execPath, [bin, 'pairing', 'revoke', 'telegram', '42'], { cwd: tmp.dir, env })).stdout).toMatch(/Revoked/);
    const again = await run(process.execPath, [bin, 'pairing', 'approve', 'telegram', 'ZZZZZZZZ'], { cwd: tmp.dir, env }).catch((e: { code: number; stderr: string }) => e);
    expect((again as { stderr: string }).stderr).toMatch(/No pending pairing code/);
  }, 30_000);

  it('doctor reports the offline provider and the state folder', async () => {
    const { stdout } = await run(process.execPath, [bin, 'doctor'], { cwd: tmp.dir, env: cleanEnv(tmp.dir) });
    expect(stdout).toMatch(/^ok\s+state folder: .* is writable$/m);
    expect(stdout).toMatch(/^warn\s+provider default: offline/m);
  });
});
