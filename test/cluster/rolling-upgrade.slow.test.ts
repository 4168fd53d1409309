// A rolling upgrade (issue 31): a replica of the previous version keeps answering while a replica of this version
// starts beside it on the same database and applies this version's migrations, which only add (expand); nothing is
// dropped or renamed until every old replica is gone (contract, in a later migration). The previous version is the
// commit below, taken out of this clone's history with `git archive` and run on this checkout's node_modules.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/cluster/schema.ts';
import { startFakeBotApi, type FakeBotApi } from '../../bench/cluster/fake-bot-api.ts';
import { describePg, useTestDatabase } from '../helpers/postgres.ts';
import { bin, startProcess } from '../helpers/process.ts';
import { until } from '../helpers/wait.ts';
import { replicaConfig } from './chaos/replica-processes.ts';
import { startRecordingLlm, type RecordingLlm } from './chaos/recording-llm.ts';
import { CHAT_BASE, driveWebhooks, messageText, telegramPlatform } from './chaos/webhook-driver.ts';

/** The previous version: the last commit before issue 30's and 31's migrations (its schema ends at 005-jobs). */
const PREVIOUS = '12324aee063f54d8f3c66e7174c06aded623904f';
const root = path.resolve(import.meta.dirname, '../..');

function hasCommit(sha: string): boolean {
  try {
    execFileSync('git', ['-C', root, 'cat-file', '-e', `${sha}^{commit}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const db = useTestDatabase({ migrate: false });
const tmp = mkdtempSync(path.join(tmpdir(), 'switchboard-upgrade-'));
const started: ReturnType<typeof startProcess>[] = [];
let llm: RecordingLlm | undefined;
let bot: FakeBotApi | undefined;
afterAll(async () => {
  for (const p of started) {
    p.child.kill('SIGKILL');
    await p.exited;
  }
  await Promise.all([llm?.close(), bot?.close()]);
  rmSync(tmp, { recursive: true, force: true });
});

describePg('rolling upgrade: the previous version beside this one on one database', () => {
  it.skipIf(!hasCommit(PREVIOUS))(`a replica of ${PREVIOUS.slice(0, 7)} keeps answering while this version starts beside it and migrates`, async () => {
    const old = path.join(tmp, 'previous');
    mkdirSync(old);
    execFileSync('sh', ['-c', `git -C '${root}' archive ${PREVIOUS} | tar -x -C '${old}'`]);
    symlinkSync(path.join(root, 'node_modules'), path.join(old, 'node_modules'));
    llm = await startRecordingLlm(() => 40);
    bot = await startFakeBotApi();
    const replies = new Map<string, number>();
    bot.onSend = (chatId, text) => {
      const key = `${chatId} ${text}`;
      replies.set(key, (replies.get(key) ?? 0) + 1);
    };
    const secret = 'upgrade-secret';
    const settings = { store: db.uri, llmBaseURL: `${llm.baseURL}`, telegram: { token: bot.token, apiRoot: bot.apiRoot, webhookSecret: secret }, maxConcurrent: 4, laneLeaseMs: 3000, pollMs: 250 };
    const start = (id: string, command: string) => {
      const dir = path.join(tmp, id);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'switchboard.json'), JSON.stringify(replicaConfig(id, settings)));
      const proc = startProcess(dir, { TELEGRAM_BOT_TOKEN: bot!.token, TELEGRAM_API_ROOT: bot!.apiRoot }, command);
      proc.child.stderr?.on('data', (chunk: Buffer) => proc.lines.push(chunk.toString()));
      started.push(proc);
      return proc;
    };
    const applied = async (): Promise<string[]> => {
      const pool = new pg.Pool({ connectionString: db.uri, max: 1 });
      try {
        return (await pool.query<{ id: string }>('SELECT id FROM sb_migration ORDER BY id')).rows.map((r) => r.id);
      } finally {
        await pool.end();
      }
    };
    const drive = (urls: string[], chats: number[], messages: number) => driveWebhooks({
      platform: telegramPlatform(secret), chats, messagesPerChat: messages, targets: () => urls, maxConnections: 8, thinkMs: () => 0,
    });

    const previous = start('old', path.join(old, 'bin', 'switchboard.mjs'));
    const oldUrl = await previous.url;
    expect((await applied()).at(-1)).toBe('005-jobs');
    await drive([oldUrl], [0, 1, 2, 3], 3);

    // This version starts beside it and applies its own migrations while the old replica keeps serving.
    const current = start('new', bin);
    const [, newUrl] = await Promise.all([drive([oldUrl], [4, 5], 3), current.url]);
    expect(await applied()).toEqual(MIGRATIONS.map((m) => m.id).sort());
    const both = await drive([oldUrl, newUrl], [6, 7, 8, 9, 10, 11, 12, 13], 4);
    expect(both.acked).toHaveLength(32);

    const expected: string[] = [];
    const expectReplies = (chats: readonly number[], count: number) => {
      for (const chat of chats) for (let i = 0; i < count; i++) expected.push(`${CHAT_BASE + chat} re: ${messageText(chat, i)}`);
    };
    expectReplies([0, 1, 2, 3, 4, 5], 3);
    expectReplies([6, 7, 8, 9, 10, 11, 12, 13], 4);
    await until(() => expected.every((k) => replies.has(k)), 'every message answered', 18_000);
    // The old replica is stopped (SIGTERM, as an upgrade stops it); the new one serves alone, an old version's
    // session included.
    previous.child.kill('SIGTERM');
    await previous.exited;
    await drive([newUrl], [0, 14, 15], 2);
    expectReplies([14, 15], 2);
    await until(() => expected.every((k) => replies.has(k)) && replies.get(`${CHAT_BASE} re: ${messageText(0, 1)}`) === 2, 'the new replica answered', 18_000);
    // Each answered once (chat 0 got its first two messages again as new updates: two more answers).
    expect(expected.filter((k) => replies.get(k) !== (k.startsWith(`${CHAT_BASE} `) && /m[01]$/.test(k) ? 2 : 1))).toEqual([]);
    expect(new Set(llm.calls.filter((c) => /^c1[45] /.test(c.text)).map((c) => c.replica))).toEqual(new Set(['new']));
    // The old replica never hit the new schema: no database error in its log.
    expect(previous.lines.filter((l) => /"level":(50|60)|column .* does not exist|relation .* does not exist/.test(l))).toEqual([]);
  }, 240_000);
});
