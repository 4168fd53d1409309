import { appendFile, mkdir } from 'node:fs/promises';
import path from 'node:path';

/** The reply that means "nothing worth keeping". */
export const NO_REPLY = 'NO_REPLY';

/** The silent request appended to the conversation before a compaction. */
export function memoryFlushPrompt(relativeFile: string): string {
  return [
    '[Pre-compaction memory flush] This conversation is about to be compacted: older messages will be replaced by a summary.',
    `Write down what is worth remembering beyond this conversation (facts about the user, decisions, preferences, commitments, open tasks, exact identifiers) as short Markdown bullet points. They are appended to ${relativeFile} in your workspace.`,
    `Reply with the notes only, or with ${NO_REPLY} when there is nothing new worth keeping. This message and your reply are not shown to the user.`,
  ].join(' ');
}

/** `YYYY-MM-DD` of an instant in a time zone. */
export function localDate(now: number, timeZone: string): string {
  const parts = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).formatToParts(now);
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? '00';
  return `${get('year')}-${get('month')}-${get('day')}`;
}

/** `HH:MM` of an instant in a time zone. */
export function localTime(now: number, timeZone: string): string {
  return new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(now);
}

/** `memory/YYYY-MM-DD.md`, relative to the workspace, for the session's local date. */
export function memoryFileOf(now: number, timeZone: string): string {
  return path.posix.join('memory', `${localDate(now, timeZone)}.md`);
}

/** The notes of a flush reply, or undefined when the model had nothing to keep. */
export function flushNotes(reply: string): string | undefined {
  const text = reply.trim();
  if (!text || text.replace(/[.\s`*]/g, '').toUpperCase() === NO_REPLY) return undefined;
  return text;
}

/** Appends notes under a time-stamped heading to `<workspace>/memory/YYYY-MM-DD.md`. Returns the file's path. */
export async function appendMemoryNotes(
  workspace: string, notes: string, at: { now: number; timeZone: string; sessionKey: string },
): Promise<string> {
  const file = path.join(workspace, memoryFileOf(at.now, at.timeZone));
  await mkdir(path.dirname(file), { recursive: true });
  await appendFile(file, `## ${localTime(at.now, at.timeZone)} · ${at.sessionKey} (before compaction)\n\n${notes}\n\n`, 'utf8');
  return file;
}
