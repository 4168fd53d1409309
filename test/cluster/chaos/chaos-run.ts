import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { startFakeTelegram, type FakeTelegram } from '../../fakes/fake-telegram.ts';
import { tempDir } from '../../helpers/gateway.ts';
import { ChaosExtras, type ChaosExtrasLoad } from './chaos-extras.ts';
import { chaosReport, summaryLine, type ChaosReport, type Fault, type PlatformSend } from './chaos-report.ts';
import { extrasReport, jobsSettled } from './extras-report.ts';
import { startRecordingLlm, type RecordingLlm } from './recording-llm.ts';
import { ReplicaSet } from './replica-processes.ts';
import { driveWebhooks, messageText, slackPlatform, telegramPlatform, type AckedUpdate } from './webhook-driver.ts';

/** The size and pace of a chaos run. */
export interface ChaosLoad {
  /** Telegram chats. */
  chats: number;
  /** Slack DMs (signed Events API posts with Slack's retries), besides the Telegram chats. */
  slackChats: number;
  messagesPerChat: number;
  /** Fake LLM latency: uniform in [min, max] ms. */
  llmMs: [number, number];
  maxConcurrent: number;
  laneLeaseMs: number;
  pollMs: number;
  /** Mean pause of a chat between its messages (ms); a third of the messages follow the previous one at once. */
  meanThinkMs: number;
  /** How long the queue may take to drain after the last acknowledgement. */
  drainMs: number;
  /** Goal runs, jobs, photos and a re-keying restart under the same faults (chaos-extras.ts); none when absent. */
  extras?: ChaosExtrasLoad;
}

/** The faults of a run, scheduled by the share of updates acknowledged so far. */
export type ChaosScenario =
  | { kind: 'kill'; first: { replica: string; at: number; restartAfterMs: number }; second: { replica: string; at: number } }
  | { kind: 'freeze'; replica: string; at: number; forMs: number };

/** A fresh database on the admin URI's server, dropped by `drop`. */
async function freshDatabase(adminUri: string): Promise<{ uri: string; pool: pg.Pool; drop: () => Promise<void> }> {
  const name = `sb_chaos_${randomBytes(6).toString('hex')}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: adminUri });
    await client.connect();
    try { await client.query(sql); } finally { await client.end(); }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(adminUri);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  pool.on('error', () => undefined);
  return { uri: url.toString(), pool, drop: async () => { await pool.end(); await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`); } };
}

/** Waits for `condition`, polling every `everyMs`, at most `boundMs`; false when it never held. */
async function waitFor(condition: () => Promise<boolean>, boundMs: number, everyMs = 250): Promise<boolean> {
  const deadline = Date.now() + boundMs;
  for (;;) {
    if (await condition().catch(() => false)) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Everything a run saw, for a closer look before it is cleaned up. */
export interface ChaosRaw {
  pool: pg.Pool;
  telegram: FakeTelegram;
  slack: FakeSlack;
  llm: RecordingLlm;
  acked: AckedUpdate[];
  faults: Fault[];
  replicas: ReplicaSet;
}

/** The outcome of a run: the measures, the summary line, and what the driver saw. */
export interface ChaosOutcome {
  report: ChaosReport;
  summary: string;
  drained: boolean;
  failures: Record<string, number>;
  seconds: number;
  /** Log lines of the replicas that mention errors (for a failing run's message). */
  errorLines: string[];
}

/**
 * One chaos run: 3 replica processes (own state folders, one fresh database), the recording LLM, the fake
 * Telegram, the webhook driver; the scenario's faults; then the measures once the queue drained.
 */
export async function runChaos(name: string, adminUri: string, load: ChaosLoad, scenario: ChaosScenario, inspect?: (raw: ChaosRaw) => Promise<void>): Promise<ChaosOutcome> {
  const db = await freshDatabase(adminUri);
  const tmp = tempDir('switchboard-chaos-');
  const [min, max] = load.llmMs;
  const extras = load.extras ? new ChaosExtras(load.extras, load.chats, load.chats + load.slackChats) : undefined;
  const llm = await startRecordingLlm((call) => extras?.latencyOf(call) ?? min + Math.random() * (max - min), extras?.respond);
  const telegram = await startFakeTelegram();
  await extras?.preparePhotos(telegram, load.messagesPerChat);
  const slack = await startFakeSlack();
  const secret = 'chaos-secret';
  const signingSecret = 'chaos-slack-signing-secret';
  const replicas = new ReplicaSet(tmp.dir, {
    store: db.uri, llmBaseURL: llm.baseURL, telegram: { token: telegram.token, apiRoot: telegram.apiRoot, webhookSecret: secret },
    slack: { botToken: 'xoxb-chaos-token', signingSecret, apiUrl: slack.apiUrl },
    maxConcurrent: load.maxConcurrent, laneLeaseMs: load.laneLeaseMs, pollMs: load.pollMs, ...(extras ? { extraConfig: extras.config() } : {}),
  });
  const faults: Fault[] = [];
  try {
    await Promise.all(['r1', 'r2', 'r3'].map((id) => replicas.start(id)));
    const sends = (): PlatformSend[] => [
      ...telegram.callsOf('sendMessage').map((c) => ({ text: String(c.body.text), at: c.at, ok: c.response.ok })),
      ...slack.callsOf('chat.postMessage').map((c) => ({ text: String(c.body.text), at: c.at, ok: c.status === 200 })),
    ].sort((a, b) => a.at - b.at);
    const answered = (text: string) => sends().some((c) => c.ok && c.text === text);
    const telegramHooks = telegramPlatform(secret, 'default', extras?.photoOf);
    const slackHooks = slackPlatform(signingSecret);
    const extraCommon = { targets: () => replicas.urls(), maxConnections: 8 };
    // The re-key pairs write first and are idle before the restart; goal chats run through the whole load.
    const rekeyDrive = extras ? extras.driveRekeyChats(telegramHooks, slackHooks, extraCommon) : Promise.resolve([]);
    let loadIn = false;
    const goalDrive = extras ? extras.driveGoals(telegramHooks, extraCommon, answered, 60_000, () => loadIn) : Promise.resolve([]);
    // With the extras, a fault waits (a little) for a goal batch (the kill run's second: a job's turn) in flight on its replica.
    const busyOn = async (replica: string, what: 'goal' | 'job' = 'goal') => { await extras?.inFlight(llm.calls, replica, what, 20_000); };
    const thresholds: { share: number; resolve: () => void }[] = [];
    const progress = (share: number) => new Promise<void>((resolve) => thresholds.push({ share, resolve }));
    const schedule = async () => {
      if (scenario.kind === 'kill') {
        await progress(scenario.first.at);
        await busyOn(scenario.first.replica);
        const first: Fault = { kind: 'kill', replica: scenario.first.replica, at: Date.now(), doneAt: 0 };
        faults.push(first);
        await replicas.kill(scenario.first.replica);
        first.doneAt = Date.now();
        // With the extras, it comes back with identityLinks that merge the re-key pairs (once their sessions are idle).
        const restart = new Promise((r) => setTimeout(r, scenario.first.restartAfterMs))
          .then(() => extras?.readyForRestart(db.pool, rekeyDrive, answered))
          .then(() => replicas.start(scenario.first.replica, extras?.restartPatch()));
        await progress(scenario.second.at);
        await busyOn(scenario.second.replica, 'job');
        const second: Fault = { kind: 'kill', replica: scenario.second.replica, at: Date.now(), doneAt: 0 };
        faults.push(second);
        await replicas.kill(scenario.second.replica);
        second.doneAt = Date.now();
        await restart;
      } else {
        await progress(scenario.at);
        await busyOn(scenario.replica);
        faults.push({ kind: 'freeze', replica: scenario.replica, at: Date.now(), doneAt: Date.now() });
        replicas.freeze(scenario.replica);
        await new Promise((r) => setTimeout(r, scenario.forMs));
        replicas.thaw(scenario.replica);
      }
    };
    const t0 = Date.now();
    const faulted = schedule();
    const total = (load.chats + load.slackChats) * load.messagesPerChat;
    let ackedSoFar = 0;
    const common = {
      messagesPerChat: load.messagesPerChat, targets: () => replicas.urls(), maxConnections: 40,
      thinkMs: () => (Math.random() < 1 / 3 ? 0 : Math.random() * 3 * load.meanThinkMs),
      onAck: () => {
        ackedSoFar++;
        for (const t of [...thresholds]) if (ackedSoFar >= t.share * total) { thresholds.splice(thresholds.indexOf(t), 1); t.resolve(); }
      },
    };
    // Telegram chats 0..chats-1, Slack DMs after them: every chat number (and so every message text) is unique.
    const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
    const drives = await Promise.all([
      driveWebhooks({ ...common, platform: telegramHooks, chats: range(0, load.chats) }),
      driveWebhooks({ ...common, platform: slackHooks, chats: range(load.chats, load.slackChats) }),
    ]);
    loadIn = true;
    const drive = { acked: [...drives.flatMap((d) => d.acked), ...await rekeyDrive], failures: {} as Record<string, number> };
    await goalDrive;
    for (const [i, d] of drives.entries()) for (const [k, v] of Object.entries(d.failures)) drive.failures[`${i ? 'slack' : 'telegram'} ${k}`] = v;
    for (const t of thresholds.splice(0)) t.resolve();
    await faulted;
    // Drained: every session's queue done, and every reply at the platform (or logged as undeliverable).
    const undelivered = () => new Set(replicas.replicas.flatMap((r) => r.starts.flatMap((p) => p.lines))
      .filter((l) => l.includes('"reply could not be delivered"')).map((l) => /"correlationId":"([^"]+)"/.exec(l)?.[1] ?? ''));
    let cutoff = 0;
    const drained = await waitFor(async () => {
      cutoff = Date.now();
      const { rows } = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM sb_lane WHERE next_seq > done_seq');
      if (rows[0]?.n !== '0') return false;
      const replied = new Set(sends().filter((c) => c.ok).map((c) => c.text));
      const missing = drive.acked.filter((a) => !replied.has(`re: ${messageText(a.chat, a.index)}`)).length;
      // Job runs keep coming: those done by now have their replies (the report measures due times before `cutoff`).
      return missing <= undelivered().size && (!extras || await jobsSettled(db.pool, sends()));
    }, load.drainMs);
    const seconds = (Date.now() - t0) / 1000;
    const logLines = replicas.replicas.flatMap((r) => r.starts.flatMap((p) => p.lines));
    const report = await chaosReport({
      pool: db.pool, acked: drive.acked, sends: sends(), llm: llm.calls, faults, undelivered: undelivered(),
      ...(extras ? {
        extras: (transcripts) => extrasReport({
          pool: db.pool, extras, acked: drive.acked, sends: sends(), llm: llm.calls, faults, transcripts, logLines,
          downloads: telegram.downloads, restarted: scenario.kind === 'kill', cutoff,
        }),
      } : {}),
    });
    const failures = Object.entries(drive.failures).map(([k, v]) => `${k.replace(' ', ':')}:${v}`).join(',') || 'none';
    const summary = summaryLine(name, report, {
      drained, seconds: Math.round(seconds), webhookFailures: failures, slackMaxRetryNum: Math.max(0, drives[1].maxAttempts - 1),
      telegramChats: load.chats, slackChats: load.slackChats, messagesPerChat: load.messagesPerChat,
    });
    await inspect?.({ pool: db.pool, telegram, slack, llm, acked: drive.acked, faults, replicas });
    const errorLines = replicas.replicas.flatMap((r) => r.starts.flatMap((s) => s.lines.filter((l) => /"level":(50|60)/.test(l)).map((l) => `${r.id}: ${l}`)));
    return { report, summary, drained, failures: drive.failures, seconds, errorLines };
  } finally {
    await replicas.stopAll();
    await telegram.close();
    await slack.close();
    await llm.close();
    await db.drop();
    tmp.remove();
  }
}
