import { appendFile, mkdir, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

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

/** Appends one note under a time-stamped heading to `<workspace>/memory/YYYY-MM-DD.md`. Returns the file's path. */
export async function appendMemoryNote(
  workspace: string, note: string, at: { now: number; timeZone: string; sessionKey: string; tag?: string },
): Promise<string> {
  const file = path.join(workspace, memoryFileOf(at.now, at.timeZone));
  await mkdir(path.dirname(file), { recursive: true });
  const heading = `## ${localTime(at.now, at.timeZone)} · ${at.sessionKey}${at.tag ? ` (${at.tag})` : ''}`;
  await appendFile(file, `${heading}\n\n${note.trim()}\n\n`, 'utf8');
  return file;
}

/** One note found by {@link searchMemoryNotes}. */
export interface MemoryHit {
  /** `memory/YYYY-MM-DD.md`. */
  file: string;
  heading: string;
  text: string;
}

/** Bounds of a search: the newest files first, and no more than this much text read. */
const MAX_FILES = 400;
const MAX_BYTES = 4 * 1024 * 1024;

/**
 * Notes whose heading or text contains every word of `query` (case-insensitive), newest first: files by
 * date descending, and within a file the later notes first.
 */
export async function searchMemoryNotes(workspace: string, query: string, limit: number): Promise<MemoryHit[]> {
  const dir = path.join(workspace, 'memory');
  const words = query.toLowerCase().split(/\s+/).filter(Boolean).slice(0, 20);
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.md')).sort().reverse().slice(0, MAX_FILES);
  } catch {
    return [];
  }
  const hits: MemoryHit[] = [];
  let bytes = 0;
  for (const name of names) {
    const text = await readFile(path.join(dir, name), 'utf8').catch(() => '');
    bytes += text.length;
    for (const note of splitNotes(text).reverse()) {
      const haystack = `${note.heading}\n${note.text}`.toLowerCase();
      if (words.every((w) => haystack.includes(w))) {
        hits.push({ file: path.posix.join('memory', name), heading: note.heading, text: note.text.length > 2000 ? `${note.text.slice(0, 2000)}…` : note.text });
        if (hits.length >= limit) return hits;
      }
    }
    if (bytes > MAX_BYTES) break;
  }
  return hits;
}

function splitNotes(text: string): { heading: string; text: string }[] {
  const notes: { heading: string; text: string }[] = [];
  let current: { heading: string; lines: string[] } | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('## ')) {
      if (current) notes.push({ heading: current.heading, text: current.lines.join('\n').trim() });
      current = { heading: line.slice(3).trim(), lines: [] };
    } else {
      current ??= { heading: '', lines: [] };
      current.lines.push(line);
    }
  }
  if (current) notes.push({ heading: current.heading, text: current.lines.join('\n').trim() });
  return notes.filter((n) => n.heading || n.text);
}
