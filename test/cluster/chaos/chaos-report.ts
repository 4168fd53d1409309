import type pg from 'pg';
import type { TranscriptMessage } from '../../../src/sessions/transcript.ts';
import type { ExtrasReport } from './extras-report.ts';
import type { LlmCall } from './recording-llm.ts';
import { parseText, type AckedUpdate } from './webhook-driver.ts';

/** One transcript entry with its transcript's key, former keys (re-keying) and archive mark. */
export interface TranscriptRow {
  sessionId: string;
  sessionKey: string;
  formerKeys: string[];
  archived: boolean;
  entry: TranscriptMessage;
}

/** Every message entry of every transcript (archived ones included), in order. */
export async function readTranscripts(pool: pg.Pool): Promise<TranscriptRow[]> {
  const { rows } = await pool.query<{ session_id: string; session_key: string; former_keys: string[]; archived: boolean; entry: TranscriptMessage }>(`
    SELECT e.session_id, t.session_key, t.former_keys, t.archived_at IS NOT NULL AS archived, e.entry
    FROM sb_transcript_entry e JOIN sb_transcript t USING (session_id) WHERE e.entry->>'type' = 'message' ORDER BY e.session_id, e.n`);
  return rows.map((r) => ({ sessionId: r.session_id, sessionKey: r.session_key, formerKeys: r.former_keys, archived: r.archived, entry: r.entry }));
}

/** A fault the harness injected. */
export interface Fault {
  kind: 'kill' | 'freeze';
  replica: string;
  /** Epoch ms when the signal was sent. */
  at: number;
  /** Epoch ms when the process was seen dead (a kill) or frozen (the signal sent); replies are counted from here. */
  doneAt: number;
}

/** The measures of one chaos run (SPEC §13; design §7). */
export interface ChaosReport {
  acked: number;
  /** Acknowledged updates with no reply and no done row in sb_inbox. */
  lost: number;
  /** Acknowledged updates with no reply at the fake Telegram, none of whose attempts logged a failed delivery. */
  missingReplies: number;
  /** Replies a replica gave up on and logged ("reply could not be delivered"): the platform's error, not the cluster's. */
  undeliveredReplies: number;
  /** Acknowledged updates not done in sb_inbox. */
  notDone: number;
  /** A user message more than once in a session's transcript (sb_transcript_entry). */
  committedTwice: number;
  /** Acknowledged messages in no transcript (archived ones by re-keying included), or whose answer is in none. */
  missingFromTranscript: number;
  answersMissing: number;
  /** A message's answer (`re: …`) more than once in the transcripts. */
  answersTwice: number;
  /** User entries of one delivery (`sourceId`: a platform message, a job's due time, a goal batch) more than once in a transcript. */
  entriesTwice: number;
  /** Chats whose replies (repeats of one message back to back allowed) are not in send order. */
  outOfOrderReplies: number;
  /** Sessions whose queue (sb_inbox seq) or transcript order differs from the send order. */
  outOfOrderCommits: number;
  /** Pairs of overlapping LLM calls of one session, aborted calls excepted. */
  concurrentRuns: number;
  /** Replies the platform got more than once (the send → mark window). */
  duplicateReplies: number;
  /** LLM calls beyond one per message. */
  rerunLlmCalls: number;
  abortedLlmCalls: number;
  /** Per fault: ms from the fault to the first reply on a session the victim was running (max over them). */
  recoveryMs: number[];
  /** Victim sessions per fault (LLM calls of the victim in flight at the fault). */
  victims: number[];
  /** Goal runs, jobs, media, re-keying, when the run had them. */
  extras?: ExtrasReport;
}

/** A reply a fake platform received (Telegram `sendMessage`, Slack `chat.postMessage`). */
export interface PlatformSend {
  text: string;
  /** Epoch ms when it arrived. */
  at: number;
  /** The platform took it. */
  ok: boolean;
}

/** The replies the fake platforms accepted, per chat, in arrival order, as message indexes. */
function repliesByChat(sends: PlatformSend[]): Map<number, { index: number; at: number }[]> {
  const byChat = new Map<number, { index: number; at: number }[]>();
  for (const call of sends) {
    if (!call.ok) continue;
    const parsed = parseText(call.text);
    if (!parsed) continue;
    const list = byChat.get(parsed.chat) ?? [];
    list.push({ index: parsed.index, at: call.at });
    byChat.set(parsed.chat, list);
  }
  return byChat;
}

/** Counts pairs of overlapping, non-aborted LLM calls per session. */
export function overlappingCalls(calls: LlmCall[]): number {
  const byChat = new Map<number, LlmCall[]>();
  for (const c of calls) {
    const parsed = parseText(c.text);
    if (!parsed || c.aborted) continue;
    byChat.set(parsed.chat, [...(byChat.get(parsed.chat) ?? []), c]);
  }
  let overlaps = 0;
  for (const list of byChat.values()) {
    list.sort((a, b) => a.start - b.start);
    for (let i = 1; i < list.length; i++) if (list[i]!.start < list[i - 1]!.end) overlaps++;
  }
  return overlaps;
}

/** True when the indexes never go back (a message repeated back to back is allowed). */
const inOrder = (indexes: number[]): boolean => indexes.every((x, i) => i === 0 || x >= indexes[i - 1]!);

/** Reads the database and the fakes after the queue drained and computes the measures. */
export async function chaosReport(input: {
  pool: pg.Pool; acked: AckedUpdate[]; sends: PlatformSend[]; llm: LlmCall[]; faults: Fault[];
  /** Correlation ids of turns whose reply a replica logged as not delivered. */
  undelivered?: Set<string>;
  /** The measures of the extras, given every transcript entry. */
  extras?: (transcripts: TranscriptRow[]) => Promise<ExtrasReport>;
}): Promise<ChaosReport> {
  const { pool, acked } = input;
  const { rows: inbox } = await pool.query<{ delivery_key: string; session_key: string; seq: string; done: boolean; text: string; correlation_id: string }>(
    `SELECT delivery_key, session_key, seq, done_at IS NOT NULL AS done, message->>'text' AS text, correlation_id FROM sb_inbox ORDER BY session_key, seq`,
  );
  const correlationOf = new Map(inbox.map((r) => [r.delivery_key, r.correlation_id]));
  const doneKeys = new Set(inbox.filter((r) => r.done).map((r) => r.delivery_key));
  const replies = repliesByChat(input.sends);
  const replied = new Set<string>();
  for (const [chat, list] of replies) for (const r of list) replied.add(`${chat}:${r.index}`);

  let lost = 0;
  let missingReplies = 0;
  let undeliveredReplies = 0;
  let notDone = 0;
  for (const a of acked) {
    const key = a.deliveryKey;
    const done = doneKeys.has(key);
    const answered = replied.has(`${a.chat}:${a.index}`);
    if (!done) notDone++;
    if (!answered && input.undelivered?.has(correlationOf.get(key) ?? '')) undeliveredReplies++;
    else if (!answered) missingReplies++;
    if (!done && !answered) lost++;
  }

  // Order of first deliveries: a repeated reply (a frozen replica's send window) is counted by duplicateReplies,
  // and its late arrival is that duplicate, not a reordering of the conversation.
  const firstOnly = (indexes: number[]) => indexes.filter((x, i) => indexes.indexOf(x) === i);
  const outOfOrderReplies = [...replies.values()].filter((list) => !inOrder(firstOnly(list.map((r) => r.index)))).length;

  // Commit order: the queue's seq order and each transcript's entry order, per session, against the send order.
  const bySession = new Map<string, number[]>();
  for (const r of inbox) {
    const parsed = parseText(r.text);
    if (parsed) bySession.set(r.session_key, [...(bySession.get(r.session_key) ?? []), parsed.index]);
  }
  const all = await readTranscripts(pool);
  const transcripts = new Map<string, number[]>();
  for (const e of all.filter((t) => t.entry.role === 'user')) {
    const parsed = parseText(e.entry.content ?? '');
    if (parsed) transcripts.set(e.sessionId, [...(transcripts.get(e.sessionId) ?? []), parsed.index]);
  }
  let committedTwice = 0;
  for (const list of transcripts.values()) committedTwice += list.length - new Set(list).size;
  // Every acknowledged message once in some transcript with its answer once; every delivery's user entry once.
  const userTexts = new Set(all.filter((t) => t.entry.role === 'user').map((t) => parseText(t.entry.content ?? '')).filter((p) => p).map((p) => `${p!.chat}:${p!.index}`));
  const answers = new Map<string, number>();
  for (const t of all) if (t.entry.role === 'assistant' && /^re: c\d+ m\d+$/.test(t.entry.content ?? '')) answers.set(t.entry.content, (answers.get(t.entry.content) ?? 0) + 1);
  const missingFromTranscript = acked.filter((a) => !userTexts.has(`${a.chat}:${a.index}`)).length;
  const answersMissing = acked.filter((a) => !answers.has(`re: ${a.text}`)).length;
  const answersTwice = [...answers.values()].reduce((n, c) => n + c - 1, 0);
  const sources = new Map<string, number>();
  for (const t of all) if (t.entry.role === 'user' && t.entry.sourceId) sources.set(`${t.sessionId} ${t.entry.sourceId}`, (sources.get(`${t.sessionId} ${t.entry.sourceId}`) ?? 0) + 1);
  const entriesTwice = [...sources.values()].reduce((n, c) => n + c - 1, 0);
  const strictlyIncreasing = (l: number[]) => l.every((x, i) => i === 0 || x > l[i - 1]!);
  const outOfOrderCommits = [...bySession.values()].filter((l) => !strictlyIncreasing(l)).length
    + [...transcripts.values()].filter((l) => !inOrder(l)).length;

  const okSends = input.sends.filter((c) => c.ok && parseText(c.text));
  const duplicateReplies = okSends.length - new Set(okSends.map((c) => c.text)).size;
  const llmTexts = input.llm.filter((c) => parseText(c.text));
  const rerunLlmCalls = llmTexts.length - new Set(llmTexts.map((c) => c.text)).size;

  const recoveryMs: number[] = [];
  const victims: number[] = [];
  for (const fault of input.faults) {
    const chats = new Set(input.llm
      .filter((c) => c.replica === fault.replica && c.start <= fault.doneAt && (c.aborted || c.end >= fault.at))
      .map((c) => parseText(c.text)?.chat).filter((c): c is number => c !== undefined));
    victims.push(chats.size);
    let worst = 0;
    for (const chat of chats) {
      const first = replies.get(chat)?.find((r) => r.at > fault.doneAt);
      worst = Math.max(worst, first ? first.at - fault.at : Number.POSITIVE_INFINITY);
    }
    recoveryMs.push(worst);
  }

  return {
    acked: acked.length, lost, missingReplies, undeliveredReplies, notDone, committedTwice, missingFromTranscript, answersMissing, answersTwice, entriesTwice,
    outOfOrderReplies, outOfOrderCommits, concurrentRuns: overlappingCalls(input.llm), duplicateReplies, rerunLlmCalls,
    abortedLlmCalls: input.llm.filter((c) => c.aborted).length, recoveryMs, victims,
    ...(input.extras ? { extras: await input.extras(all) } : {}),
  };
}

/** One summary line of a report. */
export function summaryLine(name: string, report: ChaosReport, extra: Record<string, unknown> = {}): string {
  const { recoveryMs, victims, extras, ...counts } = report;
  const parts = Object.entries({ ...counts, ...extras, ...extra }).map(([k, v]) => `${k}=${String(v)}`);
  const recovery = recoveryMs.map((ms, i) => (!victims[i] ? 'n/a' : Number.isFinite(ms) ? String(ms) : 'never'));
  parts.push(`recoveryMs=[${recovery.join(',')}]`, `victims=[${victims.join(',')}]`);
  return `chaos ${name}: ${parts.join(' ')}`;
}
