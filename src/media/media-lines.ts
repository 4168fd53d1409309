/**
 * The one-line descriptions of media the model gets instead of (or besides) the media itself (SPEC §15):
 * `[image: image/jpeg 1280×720, 84 KB]`, `[voice note, 12 s: could not be transcribed]`, `[file: name, mime, size]`,
 * `[file too large: name, size]`, and the fenced block of an inlined document. Names come from users: they are
 * cleaned so that none can end a line, close a bracket or a fence, or fake another line.
 */

/**
 * Why an attachment became only a line: a `MediaFetchError`'s reason (for a file too large to fetch, see
 * {@link tooLargeLine}) or a failed transcription. Other strings are shown as given (cleaned).
 */
export type MediaProblem = 'download_failed' | 'timeout' | 'undecodable' | 'unsupported' | 'too_large' | 'not_transcribed';

const PROBLEM_TEXT: Record<MediaProblem, string> = {
  download_failed: 'could not be downloaded',
  timeout: 'timed out',
  undecodable: 'could not be read',
  unsupported: 'unsupported type',
  too_large: 'too large',
  not_transcribed: 'could not be transcribed',
};

/** Longest name kept in a line (characters); longer names keep their start and extension. */
export const MAX_NAME_CHARS = 120;

/** A byte count for people: `512 B`, `84 KB`, `1.2 MB`, `3.4 GB` (1024-based, as platforms show sizes). */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '? B';
  if (n < 1024) return `${Math.round(n)} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  // KB without decimals (84 KB); MB and up with one below 10 (1.2 MB, 12 MB). 1023.6 KB is not "1024 KB".
  const text = unit === 0 || value >= 10 ? String(Math.round(value)) : value.toFixed(1).replace(/\.0$/, '');
  if (text === '1024' && unit < units.length - 1) return `1 ${units[unit + 1]!}`;
  return `${text} ${units[unit]!}`;
}

/**
 * A name (file name, mime type) as it may appear inside a line: control characters, line and paragraph
 * separators, brackets and backticks become spaces or parentheses, runs of spaces one, and it is cut to
 * {@link MAX_NAME_CHARS} keeping the extension.
 */
export function sanitizeName(name: string | undefined, max = MAX_NAME_CHARS): string {
  if (!name) return '';
  let clean = name
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g, ' ')
    .replace(/[[{<]/g, '(')
    .replace(/[\]}>]/g, ')')
    .replace(/`/g, "'")
    .replace(/\s+/g, ' ')
    .trim();
  const chars = Array.from(clean);
  if (chars.length > max) {
    const dot = clean.lastIndexOf('.');
    const ext = dot > 0 && clean.length - dot <= 12 ? Array.from(clean.slice(dot)) : [];
    clean = `${chars.slice(0, max - ext.length - 1).join('')}…${ext.join('')}`;
  }
  return clean;
}

function seconds(durationSeconds: number | undefined): string | undefined {
  if (durationSeconds === undefined || !Number.isFinite(durationSeconds) || durationSeconds < 0) return undefined;
  const s = Math.round(durationSeconds);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
}

function problemText(problem: string): string {
  return Object.hasOwn(PROBLEM_TEXT, problem) ? PROBLEM_TEXT[problem as MediaProblem] : sanitizeName(problem, 80);
}

/** `[image: image/jpeg 1280×720, 84 KB]` (without a size when the dimensions are not known). */
export function imageLine(options: { mime: string; width?: number; height?: number; size: number }): string {
  const dims = options.width && options.height ? ` ${Math.round(options.width)}×${Math.round(options.height)}` : '';
  return `[image: ${sanitizeName(options.mime, 80) || 'image'}${dims}, ${formatBytes(options.size)}]`;
}

/** `[voice note, 12 s: could not be transcribed]`; `[voice note, 12 s]` without a problem. */
export function voiceLine(options: { durationSeconds?: number; problem?: string }): string {
  const parts = ['voice note', seconds(options.durationSeconds)].filter(Boolean).join(', ');
  return `[${parts}${options.problem ? `: ${problemText(options.problem)}` : ''}]`;
}

/** `[audio: song.mp3, 3 min 12 s: could not be transcribed]`. */
export function audioLine(options: { name?: string; durationSeconds?: number; problem?: string }): string {
  const parts = [sanitizeName(options.name), seconds(options.durationSeconds)].filter(Boolean).join(', ');
  return `[audio${parts ? `: ${parts}` : ''}${options.problem ? `: ${problemText(options.problem)}` : ''}]`;
}

/** `[file: report.xlsx, application/vnd.ms-excel, 84 KB]`. */
export function fileLine(options: { name?: string; mime: string; size: number }): string {
  const parts = [sanitizeName(options.name), sanitizeName(options.mime, 80), formatBytes(options.size)].filter(Boolean);
  return `[file: ${parts.join(', ')}]`;
}

/** `[file too large: video.mp4, 48 MB]` (the file was not downloaded). */
export function tooLargeLine(options: { name?: string; size: number }): string {
  const parts = [sanitizeName(options.name), formatBytes(options.size)].filter(Boolean);
  return `[file too large: ${parts.join(', ')}]`;
}

/** `[file: report.pdf, application/pdf: could not be downloaded]` (download_failed, timeout, undecodable, unsupported). */
export function failedLine(options: { name?: string; mime?: string; reason: string }): string {
  const parts = [sanitizeName(options.name), sanitizeName(options.mime, 80)].filter(Boolean);
  return `[file${parts.length ? `: ${parts.join(', ')}` : ''}: ${problemText(options.reason)}]`;
}

/**
 * An inlined document: its name on a line, then its text in a fenced block whose fence is longer than any run
 * of backticks inside the text (so the file cannot close it and speak outside it), then a note when the text
 * was cut.
 */
export function documentBlock(options: { name: string; text: string; truncated: boolean; maxChars?: number }): string {
  let longest = 0;
  for (const run of options.text.matchAll(/`+/g)) longest = Math.max(longest, run[0].length);
  const fence = '`'.repeat(Math.max(3, longest + 1));
  const body = options.text.endsWith('\n') ? options.text : `${options.text}\n`;
  const note = options.truncated
    ? `\n[truncated${options.maxChars ? ` at ${options.maxChars.toLocaleString('en-US')} characters` : ''}: the rest of the file is not shown]`
    : '';
  return `[file: ${sanitizeName(options.name) || 'document'}]\n${fence}\n${body}${fence}${note}`;
}
