import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StateLock } from '../../src/core/state-lock.ts';
import { startFakeTelegram } from '../fakes/fake-telegram.ts';
import { tempDir } from '../helpers/gateway.ts';
import { bin, cleanEnv, startProcess } from '../helpers/process.ts';
import { until } from '../helpers/wait.ts';

const repo = path.resolve(import.meta.dirname, '../..');


/** Runs `switchboard <args>` to the end; resolves with its exit code and output (stdin optional). */
function run(dir: string, args: string[], env: NodeJS.ProcessEnv = {}, input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [bin, ...args], { cwd: dir, env: cleanEnv(dir, env), timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
    child.stdin?.end(input ?? '');
  });
}


const closedPort = async () => {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
};

describe('one machine: one owner per state folder, the command line through the running gateway', () => {
  let tmp: ReturnType<typeof tempDir>;
  const children: ReturnType<typeof startProcess>[] = [];
  beforeEach(() => { tmp = tempDir(); });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.child.exitCode === null) { c.child.kill('SIGKILL'); await c.exited; }
    tmp.remove();
  });

  it("runs the README's Quick start while a gateway runs: web chat, a `switchboard chat` turn, web chat again; nothing is lost", async () => {
    // A Telegram DM as well, so that the gateway has its inbound journal open while `switchboard chat` runs.
    const telegram = await startFakeTelegram();
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({ channels: { telegram: { dmPolicy: 'open' } } }));
    const gw = startProcess(tmp.dir, { TELEGRAM_BOT_TOKEN: telegram.token, TELEGRAM_API_ROOT: telegram.apiRoot });
    children.push(gw);
    try {
      const url = await gw.url;
      const webchat = async (text: string) => (await (await fetch(`${url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text }) })).json()) as { sessionKey: string; sessionId: string; reply: string };
      expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ ok: true });
      const first = await webchat('hello');
      expect(first).toMatchObject({ sessionKey: 'agent:main:main', reply: expect.stringContaining('(offline)') });
      telegram.pushUpdate({ message: { message_id: 1, date: 1, chat: { id: 42, type: 'private' }, from: { id: 42, is_bot: false, first_name: 'Alice' }, text: 'hello from telegram' } });
      await telegram.waitFor('sendMessage', undefined, 10_000);

      const chat = await run(tmp.dir, ['chat', '--user', 'alice'], {}, 'hello from the terminal\n');
      expect(chat.code).toBe(0);
      expect(chat.stdout).toContain(`through the gateway at ${url}`);
      expect(chat.stdout).toContain('(offline) You said: "hello from the terminal"');
      expect(chat.stdout).toContain('This conversation has 3 messages from you.'); // it saw the earlier turns

      const last = await webchat('hello again');
      expect(last.reply).toContain('This conversation has 4 messages from you.');
      expect(last.sessionId).toBe(first.sessionId);

      const listed = JSON.parse((await run(tmp.dir, ['sessions', '--json'])).stdout) as { sessions: { key: string; channel: string; messageCount: number }[] };
      expect(listed.sessions).toEqual([expect.objectContaining({ key: 'agent:main:main', messageCount: 8, channel: 'webchat' })]);

      // The entry's token totals equal the ledger's sum for the key (no turn lost to a concurrent writer).
      const entry = await (await fetch(`${url}/admin/sessions/${encodeURIComponent('agent:main:main')}`)).json() as { totalTokens: number };
      const ledgerFile = path.join(tmp.dir, 'data', 'audit', 'turn-token-usage.jsonl');
      const ledger = () => (existsSync(ledgerFile) ? readFileSync(ledgerFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, number | string>) : []);
      await expect.poll(() => ledger().length).toBe(4);
      const sum = ledger().reduce((n, r) => n + Number(r.inputTokens) + Number(r.outputTokens) + Number(r.cacheReadTokens) + Number(r.cacheWriteTokens), 0);
      expect(entry.totalTokens).toBe(sum);
      expect(ledger().map((r) => r.channel)).toEqual(['webchat', 'telegram', 'cli', 'webchat']);

      // The transcript has every turn.
      const transcript = readFileSync(path.join(tmp.dir, 'data', 'agents', 'main', 'sessions', `${first.sessionId}.jsonl`), 'utf8')
        .split('\n').filter(Boolean).map((l) => JSON.parse(l) as { role?: string; content?: string }).filter((e) => e.role === 'user');
      expect(transcript.map((e) => e.content)).toEqual(['hello', 'hello from telegram', 'hello from the terminal', 'hello again']);

      // The gateway's journal is the file on disk (not one renamed away by another process).
      const inbox = path.join(tmp.dir, 'data', 'inbox.jsonl');
      if (existsSync(`/proc/${gw.child.pid}/fd`)) {
        const fds = readdirSync(`/proc/${gw.child.pid}/fd`).map((fd) => `/proc/${gw.child.pid}/fd/${fd}`);
        const open = fds.filter((fd) => { try { return readlinkSync(fd).startsWith(inbox); } catch { return false; } });
        expect(open.map((fd) => readlinkSync(fd))).toEqual([inbox]);
        expect(statSync(open[0]!).ino).toBe(statSync(inbox).ino);
      }
      expect(readFileSync(inbox, 'utf8')).toContain('hello from telegram');
      gw.child.kill('SIGTERM');
      expect(await gw.exited).toBe(0);
    } finally {
      await telegram.close();
    }
  }, 60_000);

  it('a second start on the same state folder exits non-zero naming the first; after kill -9 of the first, a new start succeeds', async () => {
    const first = startProcess(tmp.dir);
    children.push(first);
    const url = await first.url;
    const port = new URL(url).port;
    const second = await run(tmp.dir, ['start'], { SWITCHBOARD_PORT: '0' });
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain(`A Switchboard gateway already runs on the state folder ${path.join(tmp.dir, 'data')}: pid ${first.child.pid}, port ${port} (${url})`);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    // In-process commands would be refused too; `sessions` goes through the running gateway instead.
    expect((await run(tmp.dir, ['sessions'])).stdout).toBe('No sessions yet.\n');

    first.child.kill('SIGKILL');
    await first.exited;
    const third = startProcess(tmp.dir);
    children.push(third);
    const again = await third.url;
    expect((await fetch(`${again}/healthz`)).status).toBe(200);
    const owner = JSON.parse(readFileSync(path.join(tmp.dir, 'data', 'gateway.json'), 'utf8')) as { pid: number };
    expect(owner.pid).toBe(third.child.pid);
    third.child.kill('SIGTERM');
    expect(await third.exited).toBe(0);
    expect(existsSync(path.join(tmp.dir, 'data', 'gateway.json'))).toBe(false);
  }, 60_000);

  it('doctor reports a port taken by another server, a dead provider and a rejected token, each with what to do', async () => {
    const other: Server = createServer((_req, res) => res.end('not switchboard'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const telegram = await startFakeTelegram();
    try {
      const dead = await closedPort();
      const result = await run(tmp.dir, ['doctor'], {
        SWITCHBOARD_PORT: String((other.address() as AddressInfo).port),
        OPENAI_BASE_URL: `http://127.0.0.1:${dead}/v1`, OPENAI_API_KEY: 'sk-test',
        TELEGRAM_BOT_TOKEN: '123:not-the-token', TELEGRAM_API_ROOT: telegram.apiRoot,
      });
      expect(result.code).toBe(1);
      expect(result.stdout).toMatch(/^FAIL\s+port: 127\.0\.0\.1:\d+ is taken by another program: stop it, or start on another port with --port <n> or SWITCHBOARD_PORT$/m);
      expect(result.stdout).toMatch(new RegExp(`^FAIL\\s+provider default: openai http://127\\.0\\.0\\.1:${dead}/v1: it is unreachable: is the server up\\? Check OPENAI_BASE_URL`, 'm'));
      expect(result.stdout).toMatch(/^FAIL\s+telegram\/default: Telegram rejected the token \(HTTP 401\): copy it again from @BotFather into TELEGRAM_BOT_TOKEN$/m);
      expect(result.stdout).not.toContain('not-the-token');
    } finally {
      await telegram.close();
      await new Promise((resolve) => other.close(resolve));
    }
  }, 30_000);

  it("doctor says the port is this state folder's gateway's, and warns when the main DM session is shared", async () => {
    // Two different people allowed into DMs while dmScope is "main".
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({ channels: { telegram: { dmPolicy: 'allowlist', allowFrom: ['42', '@bob'] } } }));
    const gw = startProcess(tmp.dir, { TELEGRAM_BOT_TOKEN: '123:abc', TELEGRAM_API_ROOT: `http://127.0.0.1:${await closedPort()}` });
    children.push(gw);
    const url = await gw.url;
    const port = new URL(url).port;
    expect(gw.lines.some((l) => l.includes('session.dmScope is \\"main\\" and 2 different people'))).toBe(true); // the start-up log says it too
    const result = await run(tmp.dir, ['doctor'], { SWITCHBOARD_PORT: port, TELEGRAM_BOT_TOKEN: '123:abc', TELEGRAM_API_ROOT: `http://127.0.0.1:${await closedPort()}` });
    expect(result.stdout).toMatch(new RegExp(`^ok\\s+port: 127\\.0\\.0\\.1:${port} is used by this state folder's gateway \\(pid ${gw.child.pid}\\)$`, 'm'));
    expect(result.stdout).toMatch(/^ok\s+state folder: .* in use by the gateway at http:\/\/127\.0\.0\.1:\d+ \(pid \d+\)$/m);
    expect(result.stdout).toMatch(/^warn\s+dm sessions: session\.dmScope is "main" and 2 different people can write to the bot directly \(telegram:42, telegram:bob\): all of them share ONE conversation .* "per-peer"/m);
  }, 30_000);

  it('doctor starts each MCP server once: a working one is ok with its tool count, a missing one FAILs with what to check, and the exit code is 1', async () => {
    const fixture = path.join(repo, 'test/tools/mcp/fixture-server.ts');
    writeFileSync(path.join(tmp.dir, 'switchboard.json'), JSON.stringify({ mcp: { servers: {
      fx: { command: process.execPath, args: ['--import', 'tsx', fixture], cwd: repo },
      gone: { command: path.join(tmp.dir, 'no-such-server') },
    } } }));
    const result = await run(tmp.dir, ['doctor'], { SWITCHBOARD_PORT: String(await closedPort()) });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^ok\s+mcp fx: stdio server ready with 8 tools$/m);
    expect(result.stdout).toMatch(/^FAIL\s+mcp gone: .*(ENOENT|closed).*; check mcp\.servers\.gone \(command and args, or url and headers\)$/m);
    expect(result.stdout.split('\n').filter((l) => l.startsWith('FAIL'))).toHaveLength(1);
  }, 30_000);

  it('doctor reads the sessions through a running gateway, and does not open the store while a command holds the state folder', async () => {
    const chat = await run(tmp.dir, ['chat', '--user', 'alice'], {}, 'hello\n');
    expect(chat.code).toBe(0);
    const env = { SWITCHBOARD_PORT: String(await closedPort()) };
    const lock = await StateLock.acquire(path.join(tmp.dir, 'data'), { role: 'cli', command: 'switchboard migrate' });
    try {
      const busy = await run(tmp.dir, ['doctor'], env);
      expect(busy.stdout).toMatch(/^warn\s+re-keying: could not read the sessions: "switchboard migrate" \(pid \d+\) is using the state folder .*$/m);
    } finally {
      await lock.release();
    }
    expect((await run(tmp.dir, ['doctor'], env)).stdout).toMatch(/^ok\s+re-keying: every session is under the key identity links and bindings give it$/m);
    const gw = startProcess(tmp.dir);
    children.push(gw);
    const url = await gw.url;
    const result = await run(tmp.dir, ['doctor'], { SWITCHBOARD_PORT: new URL(url).port });
    expect(result.stdout).toMatch(/^ok\s+re-keying: every session is under the key identity links and bindings give it$/m);
  }, 60_000);

  it('start takes --port, --host and --log-level: it listens there and writes no info lines; --port abc exits 1 naming the flag', async () => {
    const port = await closedPort();
    const child = execFile(process.execPath, [bin, 'start', '--port', String(port), '--host', '127.0.0.1', '--log-level', 'warn'], { cwd: tmp.dir, env: cleanEnv(tmp.dir) });
    let stdout = '';
    child.stdout!.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      expect(await until(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 'the gateway on --port', 6000)).toBe(true);
      expect(stdout.split('\n').filter((l) => l.includes('"level":30'))).toEqual([]);
      expect((JSON.parse(readFileSync(path.join(tmp.dir, 'data', 'gateway.json'), 'utf8')) as { url?: string }).url).toBe(`http://127.0.0.1:${port}`);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
    const bad = await run(tmp.dir, ['start', '--port', 'abc']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('gateway.port (from --port): expected a number, got "abc"');
  }, 30_000);
});
