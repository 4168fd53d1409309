import { pdfText } from './pdf-text.ts';
import { baseMime, isTextLike, sniffMime } from './sniff.ts';

export { closePdfWorkers, pdfWorkerStats } from './pdf-text.ts';

/** The text of a document, to inline for the model (SPEC §15). */
export interface DocumentText {
  text: string;
  /** True when the text was cut at `maxChars` (or, for a PDF, pages were left unread). */
  truncated: boolean;
  /** A PDF's page count. */
  pages?: number;
}

/** Options of {@link documentText}. */
export interface DocumentTextOptions {
  /** The file's mime type (the platform's or the sniffed one). */
  mime: string;
  name?: string;
  /** Longest text returned (UTF-16 code units, as JavaScript counts; a surrogate pair is never split). */
  maxChars: number;
  /** Deadline of a PDF's reading (default 15 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Default deadline of reading a PDF. */
export const PDF_TIMEOUT_MS = 15_000;

/**
 * The text of a document for the model: a text-like file (see {@link isTextLike}) decoded as UTF-8 (a BOM is
 * honoured, UTF-16 with a BOM too; other text that is not UTF-8 is read as Latin-1), or a PDF's text read in a
 * worker thread. Undefined when the file is neither, or a "text" file holds binary data (NUL bytes, mostly
 * control characters). A PDF that does not parse is `MediaFetchError('undecodable')`, one that takes longer than
 * `timeoutMs` `MediaFetchError('timeout')`; an abort rejects with the signal's reason.
 */
export async function documentText(bytes: Buffer, options: DocumentTextOptions): Promise<DocumentText | undefined> {
  const maxChars = Math.max(0, Math.floor(options.maxChars));
  const sniffed = sniffMime(bytes.subarray(0, 64));
  if (sniffed === 'application/pdf' || (baseMime(options.mime) === 'application/pdf' && !sniffed)) {
    const result = await pdfText(bytes, { maxChars, timeoutMs: options.timeoutMs ?? PDF_TIMEOUT_MS, signal: options.signal });
    return { text: result.text, truncated: result.truncated, pages: result.pages };
  }
  // Bytes that announce a binary format are not text, whatever the name says.
  if (sniffed || !isTextLike(options.mime, options.name)) return undefined;
  if (options.signal?.aborted) throw options.signal.reason;
  return decodeText(bytes, maxChars);
}

/** UTF-8 (or UTF-16 with a BOM) text of at most `maxChars` characters; undefined for binary data. */
export function decodeText(bytes: Uint8Array, maxChars: number): DocumentText | undefined {
  let encoding: 'utf-8' | 'utf-16le' | 'utf-16be' = 'utf-8';
  let start = 0;
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    start = 3;
  } else if ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff)) {
    encoding = bytes[0] === 0xff ? 'utf-16le' : 'utf-16be';
    start = 2;
  }
  // No character takes more than 4 bytes: decoding more than this cannot give more than maxChars characters,
  // and a 20 MB file is never decoded whole for 50,000 characters.
  const limit = Math.min(bytes.length, start + (maxChars + 1) * 4);
  const slice = bytes.subarray(start, limit);
  let text: string;
  if (encoding !== 'utf-8') {
    text = new TextDecoder(encoding).decode(slice.subarray(0, slice.length - (slice.length % 2)));
  } else {
    if (slice.includes(0)) return undefined;
    try {
      // stream: a character cut by the slice's end is held back rather than failing.
      text = new TextDecoder('utf-8', { fatal: true }).decode(slice, { stream: limit < bytes.length });
    } catch {
      if (controlShare(slice) > 0.1) return undefined;
      text = new TextDecoder('latin1').decode(slice);
    }
  }
  if (controlShare(text) > 0.1) return undefined;
  let truncated = false;
  if (text.length > maxChars) {
    let cut = maxChars;
    const last = text.charCodeAt(cut - 1);
    if (last >= 0xd800 && last <= 0xdbff) cut--;
    text = text.slice(0, cut);
    truncated = true;
  }
  return { text, truncated };
}

/** Share of control characters (other than tab, line breaks, form feed, escape) in the first 4096 units. */
function controlShare(data: Uint8Array | string): number {
  const n = Math.min(data.length, 4096);
  if (!n) return 0;
  let control = 0;
  for (let i = 0; i < n; i++) {
    const c = typeof data === 'string' ? data.charCodeAt(i) : data[i]!;
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d && c !== 0x0c && c !== 0x1b) || c === 0x7f || c === 0) control++;
  }
  return control / n;
}
