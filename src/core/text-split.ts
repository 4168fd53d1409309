/**
 * Splitting marked-up text into messages of bounded length, for the channels' renderers. A renderer turns
 * its output into atoms (grapheme clusters, whitespace, the opening and closing markup of spans);
 * `splitMarkup` packs them into messages, closing the spans open at a cut and reopening them in the next
 * message. Pure.
 */

/** Where a message may end after an atom, best last: 0 a space, 1 a line break in code, 2 a line break, 3 a blank line. */
export type BreakRank = 0 | 1 | 2 | 3;

/** Visible text: one grapheme cluster (or one escape of it), or one whitespace character. */
export interface TextAtom {
  kind: 'text';
  /** The markup sent. */
  raw: string;
  /** What it counts towards the limit. */
  units: number;
  /** A message may end right after this atom. */
  breakAfter?: BreakRank;
  /** Whitespace dropped when it falls at the edge of a message. */
  trim?: boolean;
  /** Sent instead of `raw` when the atom starts a message (`\>` for a `>` that would quote it); `units` counts it. */
  startRaw?: string;
}

/** The start of a span (bold, a link, a code block): closed at a cut, reopened after it. */
export interface OpenAtom {
  kind: 'open';
  raw: string;
  units: number;
  /** Markup that ends the span at a cut. */
  close: string;
  closeUnits: number;
  /** Markup that starts the span again in the next message (default `raw`). */
  reopen?: string;
  reopenUnits?: number;
  /** A block (code) too long for one message starts a message rather than being cut after a short start. */
  block?: boolean;
}

/** The end of the innermost open span. */
export interface CloseAtom {
  kind: 'close';
  raw: string;
  units: number;
}

/** One indivisible piece of a message. Spans must nest properly; spans left open are closed at the end. */
export type MarkupAtom = TextAtom | OpenAtom | CloseAtom;

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** Longest cluster kept whole, in UTF-16 units (the longest emoji sequences are about 15). */
const MAX_CLUSTER = 32;

/**
 * Code points that may join the one before them in a cluster: marks, ZWJ, variation selectors, skin
 * tones, tags, regional indicators, Hangul jamo and syllables, and the few spacing marks that are letters.
 */
const JOINS_PREVIOUS = /[\p{M}\p{Grapheme_Extend}\p{Emoji_Modifier}\u200C\u200D\uFE00-\uFE0F\uFF9E\uFF9F\u0E33\u0EB3\u1100-\u11FF\u3130-\u318F\uA960-\uA97F\uAC00-\uD7FF\u{1F1E6}-\u{1F1FF}\u{E0020}-\u{E007F}]/u;
/** Code points that may join the one after them: ZWJ (emoji sequences), CR (before LF), prepended marks, viramas. */
const JOINS_NEXT = /[\u200D\r\u0600-\u0605\u06DD\u070F\u0890\u0891\u08E2\u{110BD}\u{110CD}\u094D\u09CD\u0ACD\u0B4D\u0C4D\u0D4D]/u;
/** What may sit between a virama and the consonant it joins (Extend, ZWJ). */
const EXTENDS = /^[\p{M}\p{Grapheme_Extend}\p{Emoji_Modifier}\u200D]$/u;
const MAY_JOIN = new RegExp(`(${JOINS_PREVIOUS.source})|${JOINS_NEXT.source}`, 'gu');

/**
 * The grapheme clusters of a text (`Intl.Segmenter`): an emoji sequence, a flag or a letter with its
 * accents stays one piece. A pathological cluster longer than 32 units (stacked combining marks) is
 * cut between code points so that no piece can outgrow a message.
 */
export function graphemes(text: string): string[] {
  if (/^[\x00-\x7f]*$/.test(text) && !text.includes('\r\n')) return text.split('');
  // The segmenter is slow (microseconds a cluster): it only sees the stretches where code points may join.
  const out: string[] = [];
  let done = 0;
  let from = -1;
  let to = -1;
  const flush = () => {
    if (from < 0) return;
    for (const point of text.slice(done, from)) out.push(point);
    appendAll(out, clusters(text.slice(from, to)));
    done = to;
  };
  for (const m of text.matchAll(MAY_JOIN)) {
    const start = m[1] ? Math.max(done, m.index - (isLowSurrogate(text, m.index - 1) ? 2 : 1)) : m.index;
    const next = m.index + m[0].length;
    let end = next;
    if (!m[1] || /[\u200D\u094D\u09CD\u0ACD\u0B4D\u0C4D\u0D4D]/.test(m[0])) {
      // A virama joins the consonant after it across marks (Indic conjuncts): take those marks along.
      for (let c = text.codePointAt(end); c !== undefined && EXTENDS.test(String.fromCodePoint(c)); c = text.codePointAt(end)) end += c > 0xffff ? 2 : 1;
      end = Math.min(text.length, end + (isHighSurrogate(text, end) ? 2 : 1));
    }
    if (start < to) to = Math.max(to, end);
    else {
      flush();
      from = start;
      to = end;
    }
  }
  flush();
  for (const point of text.slice(done)) out.push(point);
  return out;
}

function isLowSurrogate(text: string, at: number): boolean {
  const c = text.charCodeAt(at);
  return c >= 0xdc00 && c <= 0xdfff && at > 0;
}

function isHighSurrogate(text: string, at: number): boolean {
  const c = text.charCodeAt(at);
  return c >= 0xd800 && c <= 0xdbff;
}

/** Recent short runs and their clusters: the same emoji come back again and again. */
const cache = new Map<string, string[]>();

function clusters(run: string): string[] {
  const known = cache.get(run);
  if (known) return known;
  const out: string[] = [];
  for (const { segment } of segmenter.segment(run)) appendAll(out, capped(segment));
  if (run.length <= 64) {
    if (cache.size >= 4096) cache.clear();
    cache.set(run, out);
  }
  return out;
}

function capped(cluster: string): string[] {
  if (cluster.length <= MAX_CLUSTER) return [cluster];
  const out: string[] = [];
  let piece = '';
  for (const point of cluster) {
    if (piece.length + point.length > MAX_CLUSTER) {
      out.push(piece);
      piece = '';
    }
    piece += point;
  }
  if (piece) out.push(piece);
  return out;
}

/** Appends `items` to `target` (spreading a long array into `push` can overflow the stack). */
export function appendAll<T>(target: T[], items: readonly T[]): T[] {
  for (const item of items) target.push(item);
  return target;
}

/** How `textAtoms` turns text into atoms. */
export interface TextAtomOptions {
  /** Escapes one grapheme for the markup (default: none). */
  escape?: (grapheme: string) => string;
  /** `text` counts the grapheme itself (Telegram counts the text after parsing), `raw` its escaped form (default). */
  count?: 'raw' | 'text';
  /** Inside code: whitespace is content and line breaks are weaker break points. */
  code?: boolean;
  /** Inside code, may a message end after a space (default false: code is cut at line ends or hard). */
  codeSpaceBreaks?: boolean;
}

/** Punctuation after which CJK text, which has no spaces, may be cut. */
const CJK_BREAK = /^[。．！？，、；：」』）】〕〉》]$/;

/** Text as atoms, one per grapheme cluster, with the places where a message may end. */
export function textAtoms(text: string, options: TextAtomOptions = {}): TextAtom[] {
  const escape = options.escape ?? ((g: string) => g);
  const atoms: TextAtom[] = [];
  let previousNewline = false;
  for (const g of graphemes(text)) {
    const raw = escape(g);
    const units = options.count === 'text' ? g.length : raw.length;
    const code = g.charCodeAt(0);
    if (g.length === 1 && code > 32 && code < 127) {
      atoms.push({ kind: 'text', raw, units });
      previousNewline = false;
      continue;
    }
    const newline = g === '\n' || g === '\r\n';
    if (newline) atoms.push({ kind: 'text', raw, units, breakAfter: options.code ? 1 : previousNewline ? 3 : 2, trim: true });
    else if (/^\s+$/.test(g)) {
      if (!options.code) atoms.push({ kind: 'text', raw, units, breakAfter: 0, trim: true });
      else atoms.push(options.codeSpaceBreaks ? { kind: 'text', raw, units, breakAfter: 0 } : { kind: 'text', raw, units });
    } else atoms.push(CJK_BREAK.test(g) ? { kind: 'text', raw, units, breakAfter: 0 } : { kind: 'text', raw, units });
    previousNewline = newline;
  }
  return atoms;
}

interface Break {
  /** First atom after the break. */
  atom: number;
  units: number;
  /** Open spans at the break (indices of their open atoms; stacks are never mutated, only replaced). */
  stack: readonly number[];
  rank: BreakRank;
}

/**
 * Packs atoms into messages of at most `limit` units, open spans' closing markup included. A message
 * ends at the best break point in its second half (blank line, then line break, then space) that is not
 * inside a span which would fit whole in one message; only when there is none does it end inside such
 * a span, or, with no break point at all, between two atoms (grapheme clusters). A blank line in the
 * first half wins over a lesser break after it when the text then takes no more messages in all (a paragraph
 * is not cut mid-way for nothing). A block that must be cut
 * and began in this message moves to the next one when it can, so it starts a message. Spans open at a
 * cut are closed and reopened in the next message; whitespace at the edges, empty spans and empty
 * messages are dropped. Pure.
 */
export function splitMarkup(atoms: readonly MarkupAtom[], limit: number): string[] {
  const prefix = new Float64Array(atoms.length + 1);
  for (let i = 0; i < atoms.length; i++) prefix[i + 1] = prefix[i]! + atoms[i]!.units;
  // End (exclusive) of the word each atom belongs to: just after the next break point.
  const wordEnd = new Uint32Array(atoms.length + 1);
  wordEnd[atoms.length] = atoms.length;
  for (let i = atoms.length - 1; i >= 0; i--) {
    const a = atoms[i]!;
    wordEnd[i] = a.kind === 'text' && a.breakAfter !== undefined ? i + 1 : wordEnd[i + 1]!;
  }
  const packing: Packing = { atoms, limit, prefix, wordEnd, fits: spansThatFit(atoms, prefix, limit) };
  const chunks: string[] = [];
  let start: readonly number[] = [];
  let at = 0;
  while (at < atoms.length) {
    const message = packOne(packing, start, at, true);
    const chunk = assemble(atoms, start, message.first, message.end, message.open);
    if (chunk !== undefined) chunks.push(chunk);
    start = message.open;
    at = message.end;
  }
  return chunks;
}

/** What packing a message needs to know of the whole text. */
interface Packing {
  atoms: readonly MarkupAtom[];
  limit: number;
  prefix: Float64Array;
  wordEnd: Uint32Array;
  fits: readonly boolean[];
}

/** One message: after its reopened spans, atoms `first`..`end`-1; `open` spans are closed at its end and reopened in the next. */
interface Packed {
  first: number;
  end: number;
  open: readonly number[];
}

/**
 * Packs the message that starts at atom `at` with the spans `start` reopened (see {@link splitMarkup}). With
 * `lookahead`, a paragraph break earlier in the message wins over the break chosen when both paragraphs then fit
 * whole in as many messages in all ({@link notMoreMessages}).
 */
function packOne(p: Packing, start: readonly number[], at: number, lookahead: boolean): Packed {
  const { atoms, limit, prefix, wordEnd, fits } = p;
  const closeOf = (s: number) => (atoms[s] as OpenAtom).closeUnits;
  let stack = start;
  let first = at;
  let units = 0;
  let closing = 0;
  let content = false;
  const breaks: Break[] = [];
  for (const s of start) {
    const a = atoms[s] as OpenAtom;
    units += a.reopenUnits ?? a.units;
    closing += a.closeUnits;
  }
  let i = at;
  while (i < atoms.length) {
    const atom = atoms[i]!;
    if (i === first && atom.kind === 'text' && atom.trim) {
      first = ++i;
      continue;
    }
    const nextClosing = atom.kind === 'open' ? closing + atom.closeUnits : atom.kind === 'close' && stack.length ? closing - closeOf(stack.at(-1)!) : closing;
    if (units + atom.units + nextClosing > limit && i > first) {
      const fresh = stack.find((s) => (atoms[s] as OpenAtom).block && !start.includes(s));
      // A word longer than a message is cut anyway: fill this message rather than end it early.
      const wordStart = breaks.at(-1)?.atom ?? first;
      const hopeless = fresh === undefined && prefix[wordEnd[i]!]! - prefix[wordStart]! > limit
        && !breaks.some((b) => b.units >= limit / 2) && !stack.some((s) => fits[s]);
      // Whitespace that does not fit is dropped at the cut anyway: the message may end right there.
      const here = atom.kind === 'text' && atom.trim && atom.breakAfter !== undefined && content;
      const candidates = here ? [...breaks, { atom: i + 1, units, stack, rank: atom.breakAfter! }] : breaks;
      const cut = hopeless && !here ? undefined : chooseBreak(candidates, limit, fits, fresh);
      if (!cut) return { first, end: i, open: stack };
      const chosen = lookahead ? paragraphInstead(p, candidates, fresh, beforeMovedBlock(p, candidates, fresh, cut)) : cut;
      return { first, end: chosen.atom, open: chosen.stack };
    }
    if (atom.kind === 'open') stack = [...stack, i];
    else if (atom.kind === 'close') stack = stack.slice(0, -1);
    units += atom.units;
    closing = nextClosing;
    i++;
    if (atom.kind !== 'text') continue;
    if (!atom.trim) content = true;
    if (atom.breakAfter !== undefined && content) breaks.push({ atom: i, units, stack, rank: atom.breakAfter });
  }
  return { first, end: i, open: stack };
}

/**
 * The latest break before the block the message overflows in, rather than `cut`, when the next message from `cut`
 * would end there anyway: the block moves whole to a message of its own, and the text between `cut` and it would
 * be a message on its own too (a short line between a paragraph and a code block).
 */
function beforeMovedBlock(p: Packing, candidates: readonly Break[], fresh: number | undefined, cut: Break): Break {
  if (fresh === undefined) return cut;
  const latest = breakPool(candidates, p.fits, fresh).at(-1);
  if (!latest || latest.atom <= cut.atom) return cut;
  return packOne(p, cut.stack, cut.atom, false).end <= latest.atom ? latest : cut;
}

/**
 * The latest blank line before `cut` (one the cut could have been, in the message's first half) when ending
 * the message there takes no more messages in all than ending it at `cut`: a paragraph kept whole rather
 * than cut mid-way for nothing. Otherwise `cut`.
 */
function paragraphInstead(p: Packing, candidates: readonly Break[], fresh: number | undefined, cut: Break): Break {
  if (cut.rank === 3) return cut;
  const paragraph = breakPool(candidates, p.fits, fresh).filter((b) => b.rank === 3 && b.atom < cut.atom).at(-1);
  return paragraph && notMoreMessages(p, paragraph, cut) ? paragraph : cut;
}

/** Messages compared at most, after which the greedy cut is kept (the two ways rarely stay apart that long). */
const LOOKAHEAD_MESSAGES = 24;

/**
 * Does the rest of the text take no more messages from `a` than from `b`? Both are packed greedily, the one
 * behind first, until they meet at the same atom with the same open spans (from there they are the same) or
 * both end; undecided after {@link LOOKAHEAD_MESSAGES}: no.
 */
function notMoreMessages(p: Packing, a: Break, b: Break): boolean {
  const x = { at: a.atom, open: a.stack, n: 0 };
  const y = { at: b.atom, open: b.stack, n: 0 };
  const end = p.atoms.length;
  for (let step = 0; step < LOOKAHEAD_MESSAGES; step++) {
    if ((x.at >= end && y.at >= end) || (x.at === y.at && sameSpans(x.open, y.open))) return x.n <= y.n;
    const behind = y.at >= end || (x.at < end && x.at <= y.at) ? x : y;
    const message = packOne(p, behind.open, behind.at, false);
    if (assemble(p.atoms, behind.open, message.first, message.end, message.open) !== undefined) behind.n++;
    behind.at = message.end;
    behind.open = message.open;
  }
  return false;
}

function sameSpans(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((s, k) => s === b[k]);
}

/** For each open atom: could its whole span (with the spans around it reopened) fit in one message? */
function spansThatFit(atoms: readonly MarkupAtom[], prefix: Float64Array, limit: number): boolean[] {
  const fits = new Array<boolean>(atoms.length).fill(false);
  const open: { at: number; outer: number }[] = [];
  let outer = 0;
  for (let i = 0; i < atoms.length; i++) {
    const a = atoms[i]!;
    if (a.kind === 'open') {
      open.push({ at: i, outer });
      outer += (a.reopenUnits ?? a.units) + a.closeUnits;
    } else if (a.kind === 'close') {
      const span = open.pop();
      if (!span) continue;
      fits[span.at] = prefix[i + 1]! - prefix[span.at]! + span.outer <= limit;
      outer = span.outer;
    }
  }
  for (const span of open) fits[span.at] = prefix[atoms.length]! - prefix[span.at]! + (atoms[span.at] as OpenAtom).closeUnits + span.outer <= limit;
  return fits;
}

/** The breaks a message may end at: before a fresh block that must be cut, else outside spans that fit whole, if any. */
function breakPool(breaks: readonly Break[], fits: readonly boolean[], freshBlock: number | undefined): readonly Break[] {
  const before = freshBlock === undefined ? [] : breaks.filter((b) => !b.stack.includes(freshBlock));
  const outside = (before.length ? before : breaks).filter((b) => !b.stack.some((s) => fits[s]));
  if (before.length) return outside.length ? outside : before;
  return outside.length ? outside : breaks;
}

function chooseBreak(breaks: readonly Break[], limit: number, fits: readonly boolean[], freshBlock: number | undefined): Break | undefined {
  const pool = breakPool(breaks, fits, freshBlock);
  // In the second half of a message the best kind of break wins; otherwise the message is short
  // already, and the latest break keeps the most in it.
  const late = pool.filter((b) => b.units >= limit / 2);
  if (!late.length) return pool.at(-1);
  let best = late[0]!;
  for (const b of late) if (b.rank >= best.rank) best = b;
  return best;
}

interface Entry {
  raw: string;
  /** What to send when the entry starts the message. */
  startRaw?: string;
  kind: 'open' | 'close' | 'text';
  /** Text that is not edge whitespace. */
  content: boolean;
  removed?: boolean;
}

/** One message: reopened spans, atoms `from`..`to`-1, closing markup; without edge whitespace and empty spans. */
function assemble(atoms: readonly MarkupAtom[], start: readonly number[], from: number, to: number, open: readonly number[]): string | undefined {
  const entries: Entry[] = [];
  for (const s of start) {
    const a = atoms[s] as OpenAtom;
    entries.push({ raw: a.reopen ?? a.raw, kind: 'open', content: false });
  }
  let last = -1;
  let visible = false;
  for (let p = from; p < to; p++) {
    const a = atoms[p]!;
    const content = a.kind === 'text' && !a.trim;
    if (content) {
      last = entries.length;
      visible ||= a.raw.trim() !== '';
    }
    entries.push({ raw: a.raw, kind: a.kind, content, ...(a.kind === 'text' && a.startRaw !== undefined ? { startRaw: a.startRaw } : {}) });
  }
  if (!visible) return undefined;
  for (let k = open.length - 1; k >= 0; k--) entries.push({ raw: (atoms[open[k]!] as OpenAtom).close, kind: 'close', content: false });
  for (let k = last + 1; k < entries.length; k++) if (entries[k]!.kind === 'text') entries[k]!.removed = true;

  // Spans with nothing visible inside would show their markup (`****`) or be refused (`<b></b>`).
  const spans: { at: number; content: boolean }[] = [];
  for (let k = 0; k < entries.length; k++) {
    const e = entries[k]!;
    if (e.removed) continue;
    if (e.kind === 'open') spans.push({ at: k, content: false });
    else if (e.kind === 'close') {
      const span = spans.pop();
      if (!span) continue;
      if (!span.content) {
        entries[span.at]!.removed = true;
        e.removed = true;
      } else if (spans.length) spans.at(-1)!.content = true;
    } else if (e.content && spans.length) spans.at(-1)!.content = true;
  }
  let out = '';
  for (const e of entries) if (!e.removed) out += out === '' && e.startRaw !== undefined ? e.startRaw : e.raw;
  return out;
}
