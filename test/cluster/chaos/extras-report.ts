import type pg from 'pg';
import type { TelegramDownload } from '../../fakes/fake-telegram.ts';
import type { Fault, PlatformSend, TranscriptRow } from './chaos-report.ts';
import { goalAnswer, peerKey, toolCallId, type ChaosExtras } from './chaos-extras.ts';
import type { LlmCall } from './recording-llm.ts';
import { CHAT_BASE, messageText, type AckedUpdate } from './webhook-driver.ts';

/** The measures of the extras (goal runs, jobs, media, re-keying) of one chaos run. */
export interface ExtrasReport {
  /** Photo messages acknowledged; of them: no reply at the platform, an LLM call without exactly one image in its last user message, no such call at all. */
  mediaMessages: number;
  mediaUnanswered: number;
  mediaCallsWithoutImage: number;
  mediaNotSeen: number;
  /** Photo messages whose transcript entry does not record the image (as `image`, with the photo's sha256). */
  mediaNotRecorded: number;
  /** Downloads of the photos at the fake (a fetch cut short by a kill is tried again by the next replica). */
  mediaDownloads: number;
  /** Goals set and started; of them: the answer not at the chat, the driver's wait for it timed out. */
  goals: number;
  goalsUnanswered: number;
  goalTimeouts: number;
  /** A goal's answer more than once in the transcripts (a batch run twice). */
  goalAnswersTwice: number;
  /** Tool rounds committed more than once (same tool call id twice), and rounds missing from an answered goal. */
  goalRoundsTwice: number;
  goalRoundsMissing: number;
  /** Pairs of overlapping (not aborted) LLM calls of one goal chat: two batches of a session at once. */
  goalConcurrent: number;
  /** Goal sessions left `running` or `continuing` after the drain. */
  goalsNotSettled: number;
  /** Background batches queued (continue and resume) and of them resumes; goals with a call in flight on a faulted replica. */
  goalBatches: number;
  goalResumes: number;
  goalsHit: number;
  /** Job runs with an LLM call in flight on a faulted replica. */
  jobsHit: number;
  /** Job due times up to the cutoff; queued twice; committed twice (user entry) or answered twice (assistant entry) in the job session. */
  jobRuns: number;
  jobQueuedTwice: number;
  jobRunsTwice: number;
  jobAnswersTwice: number;
  /** Due slots from a job's first look to the cutoff that never ran; runs not done; runs with no reply; replies sent twice (send window). */
  jobSlotsMissed: number;
  jobNotDone: number;
  jobUnanswered: number;
  jobRepliesTwice: number;
  /** Pairs merged by the restart's identityLinks (0 without a restart); log lines of merges, moves and put-off re-keys. */
  rekeyPairs: number;
  rekeyMerged: number;
  rekeyMoved: number;
  rekeyDeferred: number;
  /** Pairs whose entries or transcripts are not as the re-keying rules say (SPEC §12; README "Several machines"). */
  rekeyWrong: number;
}

/** Everything the extras' measures read. */
export interface ExtrasInput {
  pool: pg.Pool;
  extras: ChaosExtras;
  acked: AckedUpdate[];
  sends: PlatformSend[];
  llm: LlmCall[];
  faults: Fault[];
  transcripts: TranscriptRow[];
  logLines: string[];
  downloads: TelegramDownload[];
  /** The re-keying restart happened (the kill scenario). */
  restarted: boolean;
  /** Epoch ms when the drained queue was seen: job due times a few seconds before it are measured. */
  cutoff: number;
}

const JOB_KEY = /^internal:default:job:([^:]+):(\d+)$/;

/** The job runs queued so far: one row per queued due time. */
async function jobRows(pool: pg.Pool): Promise<{ job: string; due: number; correlationId: string; done: boolean; key: string }[]> {
  const { rows } = await pool.query<{ delivery_key: string; correlation_id: string; done: boolean }>(
    `SELECT delivery_key, correlation_id, done_at IS NOT NULL AS done FROM sb_inbox WHERE delivery_key LIKE 'internal:default:job:%'`);
  return rows.flatMap((r) => {
    const m = JOB_KEY.exec(r.delivery_key);
    return m ? [{ job: m[1]!, due: Number(m[2]), correlationId: r.correlation_id, done: r.done, key: r.delivery_key }] : [];
  });
}

/** True when every finished job run has its reply at the platform (the drain waits for it too). */
export async function jobsSettled(pool: pg.Pool, sends: PlatformSend[]): Promise<boolean> {
  const replied = new Set(sends.filter((s) => s.ok).map((s) => /\[([^\]]+)\]$/.exec(s.text)?.[1]));
  return (await jobRows(pool)).every((r) => !r.done || replied.has(r.correlationId));
}

/** Distinct `key`s of calls tagged `prefix…` in flight on a replica when a fault hit it. */
function hitBy(input: ExtrasInput, prefix: string, key: (c: LlmCall) => string): Set<string> {
  const hit = new Set<string>();
  for (const fault of input.faults) {
    for (const c of input.llm) {
      if (c.tag?.startsWith(prefix) && c.replica === fault.replica && c.start <= fault.doneAt && (c.aborted || c.end >= fault.at)) hit.add(key(c));
    }
  }
  return hit;
}

const countBy = <T>(list: T[], key: (x: T) => string): Map<string, number> => {
  const out = new Map<string, number>();
  for (const x of list) out.set(key(x), (out.get(key(x)) ?? 0) + 1);
  return out;
};
const beyondOne = (counts: Map<string, number>): number => [...counts.values()].reduce((n, c) => n + Math.max(0, c - 1), 0);

function mediaMeasures(input: ExtrasInput): Pick<ExtrasReport, 'mediaMessages' | 'mediaUnanswered' | 'mediaCallsWithoutImage' | 'mediaNotSeen' | 'mediaNotRecorded' | 'mediaDownloads'> {
  const { extras } = input;
  const media = input.acked.filter((a) => a.platform === 'telegram' && extras.photoOf(a.chat, a.index));
  const replied = new Set(input.sends.filter((s) => s.ok).map((s) => s.text));
  const texts = new Set(media.map((a) => messageText(a.chat, a.index)));
  const calls = input.llm.filter((c) => texts.has(c.text));
  const users = input.transcripts.filter((t) => t.entry.role === 'user');
  const paths = new Set([...extras.photos.values()].map((p) => p.path));
  return {
    mediaMessages: media.length,
    mediaUnanswered: media.filter((a) => !replied.has(`re: ${a.text}`)).length,
    mediaCallsWithoutImage: calls.filter((c) => c.images !== 1).length,
    mediaNotSeen: media.filter((a) => !calls.some((c) => c.text === a.text)).length,
    mediaNotRecorded: media.filter((a) => {
      const sha = extras.photos.get(`${a.chat}:${a.index}`)?.sha256;
      return !users.some((u) => u.entry.content?.includes(a.text) && u.entry.media?.some((m) => m.as === 'image' && m.sha256 === sha));
    }).length,
    mediaDownloads: input.downloads.filter((d) => paths.has(d.path) && d.status === 200).length,
  };
}

async function goalMeasures(input: ExtrasInput): Promise<Pick<ExtrasReport, 'goals' | 'goalsUnanswered' | 'goalTimeouts' | 'goalAnswersTwice' | 'goalRoundsTwice'
  | 'goalRoundsMissing' | 'goalConcurrent' | 'goalsNotSettled' | 'goalBatches' | 'goalResumes' | 'goalsHit'>> {
  const { extras, pool } = input;
  const replied = new Set(input.sends.filter((s) => s.ok).map((s) => s.text));
  const assistants = input.transcripts.filter((t) => t.entry.role === 'assistant');
  const answers = countBy(assistants.filter((t) => /^g\d+ goal \d+ done$/.test(t.entry.content ?? '')), (t) => t.entry.content);
  const ids = countBy(assistants.flatMap((t) => (t.entry.toolCalls ?? []).map((c) => c.id)), (id) => id);
  const answered = extras.goals.filter((g) => replied.has(goalAnswer(g.chat, g.goal)));
  let goalRoundsMissing = 0;
  for (const g of answered) for (let r = 0; r < extras.load.goalToolRounds; r++) if (!ids.has(toolCallId(g.chat, g.goal, r))) goalRoundsMissing++;
  let goalConcurrent = 0;
  for (const chat of extras.goalChats) {
    const calls = input.llm.filter((c) => c.tag?.startsWith(`goal:${chat}:`) && !c.aborted).sort((a, b) => a.start - b.start);
    for (let i = 1; i < calls.length; i++) if (calls[i]!.start < calls[i - 1]!.end) goalConcurrent++;
  }
  const keys = extras.goalChats.map((c) => peerKey(String(CHAT_BASE + c)));
  const { rows: entries } = await pool.query<{ value: string }>(`SELECT value FROM keyv WHERE key = ANY($1)`, [keys.map((k) => `sessions:${k}`)]);
  const goalsNotSettled = entries.map((r) => (JSON.parse(r.value) as { value: { runState?: string } }).value.runState).filter((s) => s === 'running' || s === 'continuing').length;
  const { rows: batches } = await pool.query<{ kind: string }>(
    `SELECT message->'internal'->>'kind' AS kind FROM sb_inbox WHERE session_key = ANY($1) AND message->'internal'->>'kind' LIKE 'background_auto_%'`, [keys]);
  const hit = hitBy(input, 'goal:', (c) => c.tag!.split(':').slice(1, 3).join(':'));
  return {
    goals: extras.goals.length, goalsUnanswered: extras.goals.length - answered.length, goalTimeouts: extras.goalTimeouts,
    goalAnswersTwice: beyondOne(answers), goalRoundsTwice: beyondOne(ids), goalRoundsMissing, goalConcurrent, goalsNotSettled,
    goalBatches: batches.length, goalResumes: batches.filter((b) => b.kind === 'background_auto_resume').length, goalsHit: hit.size,
  };
}

async function jobMeasures(input: ExtrasInput): Promise<Pick<ExtrasReport, 'jobRuns' | 'jobsHit' | 'jobQueuedTwice' | 'jobRunsTwice' | 'jobAnswersTwice' | 'jobSlotsMissed'
  | 'jobNotDone' | 'jobUnanswered' | 'jobRepliesTwice'>> {
  const { pool, extras, cutoff } = input;
  // Due times a few seconds before the cutoff were queued (and so done) when the queue drained.
  const rows = (await jobRows(pool)).filter((r) => r.due <= cutoff - 3000);
  const sends = input.sends.filter((s) => s.ok).map((s) => /\[([^\]]+)\]$/.exec(s.text)?.[1]).filter((c): c is string => Boolean(c));
  const sent = countBy(sends, (c) => c);
  const jobSessions = new Set(extras.jobs.map((j) => `agent:main:job:${j.id}`));
  const inJobs = input.transcripts.filter((t) => jobSessions.has(t.sessionKey));
  const users = countBy(inJobs.filter((t) => t.entry.role === 'user' && t.entry.sourceId), (t) => t.entry.sourceId!);
  const answers = countBy(inJobs.filter((t) => t.entry.role === 'assistant' && t.entry.content), (t) => t.entry.content);
  const { rows: states } = await pool.query<{ job_id: string; since: Date }>('SELECT job_id, since FROM sb_job_state');
  let jobSlotsMissed = 0;
  for (const job of extras.jobs) {
    const since = states.find((s) => s.job_id === job.id)?.since.getTime();
    if (since === undefined) { jobSlotsMissed++; continue; }
    const ran = new Set(rows.filter((r) => r.job === job.id).map((r) => r.due));
    // Every slot after the job's first look, up to the cutoff less a margin for the last one to be queued.
    for (let slot = Math.floor(since / job.everyMs) * job.everyMs + job.everyMs; slot <= cutoff - 5000; slot += job.everyMs) if (!ran.has(slot)) jobSlotsMissed++;
  }
  return {
    jobRuns: new Set(rows.map((r) => r.key)).size, jobsHit: hitBy(input, 'job:', (c) => c.correlationId).size,
    jobQueuedTwice: beyondOne(countBy(rows, (r) => r.key)),
    jobRunsTwice: [...users.values()].reduce((n, c) => n + Math.max(0, c - 1), 0),
    jobAnswersTwice: beyondOne(answers),
    jobSlotsMissed,
    jobNotDone: rows.filter((r) => !r.done).length,
    jobUnanswered: rows.filter((r) => !sent.has(r.correlationId)).length,
    jobRepliesTwice: rows.reduce((n, r) => n + Math.max(0, (sent.get(r.correlationId) ?? 0) - 1), 0),
  };
}

async function rekeyMeasures(input: ExtrasInput): Promise<Pick<ExtrasReport, 'rekeyPairs' | 'rekeyMerged' | 'rekeyMoved' | 'rekeyDeferred' | 'rekeyWrong'>> {
  const { pool, extras } = input;
  const lines = (text: string) => input.logLines.filter((l) => l.includes(text)).length;
  const { rows } = await pool.query<{ value: string }>(`SELECT value FROM keyv WHERE key LIKE 'sessions:agent:main:direct:%'`);
  const entries = new Map(rows.map((r) => (JSON.parse(r.value) as { value: { key: string; sessionId: string } }).value).map((e) => [e.key, e.sessionId]));
  const { rows: archive } = await pool.query<{ session_id: string; merged_into: string }>('SELECT session_id, merged_into FROM sb_rekey_archive');
  const transcripts = new Map<string, TranscriptRow>();
  for (const t of input.transcripts) transcripts.set(t.sessionId, t);
  let rekeyWrong = 0;
  for (const pair of extras.pairs()) {
    const olds = [peerKey(pair.telegram), peerKey(pair.slack)];
    const target = peerKey(pair.canonical);
    if (!input.restarted) {
      if (!olds.every((k) => entries.has(k)) || entries.has(target)) rekeyWrong++;
      continue;
    }
    const survivor = entries.get(target);
    const moved = survivor ? transcripts.get(survivor) : undefined;
    const mergedAway = archive.filter((a) => a.merged_into === target);
    const archivedOk = mergedAway.length === 1 && transcripts.get(mergedAway[0]!.session_id)?.archived === true;
    const movedOk = moved && !moved.archived && moved.sessionKey === target && moved.formerKeys.length === 1 && olds.includes(moved.formerKeys[0]!);
    if (olds.some((k) => entries.has(k)) || !movedOk || !archivedOk) rekeyWrong++;
  }
  return {
    rekeyPairs: input.restarted ? extras.pairs().length : 0,
    rekeyMerged: lines('session merged into another by re-keying'), rekeyMoved: lines('session re-keyed (identity links or bindings changed)'),
    rekeyDeferred: lines('re-keying is left to a later start'), rekeyWrong,
  };
}

/** Reads the database, the fakes and the logs after the drain and computes the extras' measures. */
export async function extrasReport(input: ExtrasInput): Promise<ExtrasReport> {
  return { ...mediaMeasures(input), ...await goalMeasures(input), ...await jobMeasures(input), ...await rekeyMeasures(input) };
}
