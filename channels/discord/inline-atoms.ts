import { appendAll, textAtoms, type MarkupAtom } from '../../src/core/text-split.ts';

/** A piece of one paragraph as Discord reads it. */
type Piece =
  | { type: 'text'; text: string }
  /** Kept whole: an escape, a mention, a custom emoji, a timestamp. */
  | { type: 'atom'; raw: string }
  | { type: 'code'; fence: string; content: string }
  /** `target` as written (URL and title); `url` alone. */
  | { type: 'link'; label: string; target: string; url: string }
  | { type: 'autolink'; url: string }
  | { type: 'delim'; value: string; canOpen: boolean; canClose: boolean; pair?: 'open' | 'close' };

const LINK = /\[((?:[^[\]\\\n]|\\.|\[[^[\]\n]*\])*)\]\((<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(\s+"[^"\n]*")?\)/y;
const AUTOLINK = /<(https?:\/\/[^\s<>]+)>/y;
/** Mentions, custom emoji, timestamps, slash commands, guild navigation; bounded, so that one always fits in a message. */
const MENTION = /<(?:@[!&]?\d{1,20}|#\d{1,20}|a?:\w{1,32}:\d{1,20}|t:-?\d{1,16}(?::[tTdDfFR])?|\/[\w -]{1,100}:\d{1,20}|id:\w{1,40})>/y;
const BARE_URL = /https?:\/\/[^\s<]+/y;
/** What ends a sentence or closes markup after a bare URL rather than belonging to it. */
const URL_TAIL = /[*_~|.,:;!?'"]$/;
const BACKTICKS = /`+/y;
const MAX_TICKS = 16;
const RUN = /\*+|_+|~+|\|+/y;

/** The match of a sticky pattern at `index`, if any. */
function matchAt(re: RegExp, s: string, index: number): RegExpExecArray | null {
  re.lastIndex = index;
  return re.exec(s);
}
const PUNCTUATION = /[\p{P}\p{S}]/u;
const SPECIAL = new Set(['\\', '`', '[', '<', 'h', '*', '_', '~', '|']);

/**
 * One paragraph of Discord markdown as atoms: emphasis (`*`, `_`, `**`, `__`, `***`, `~~`, `||`),
 * code spans and masked links become spans, so a split avoids them when it can and otherwise closes
 * and reopens them (a masked link split this way becomes two links to the same URL). A link whose URL is
 * longer than `maxUrl` becomes its text followed by the URL in parentheses. Delimiters without a partner
 * are text. Pure.
 */
export function inlineAtoms(paragraph: string, maxUrl: number): MarkupAtom[] {
  const pieces = pair(lex(paragraph));
  const atoms: MarkupAtom[] = [];
  for (const p of pieces) {
    switch (p.type) {
      case 'text':
        for (const a of textAtoms(p.text)) {
          // A `>`, `#` or `-` that a cut puts at the start of a message would make it a quote, a heading or a list there.
          atoms.push(a.raw === '>' || a.raw === '#' || a.raw === '-' ? { ...a, units: 2, startRaw: `\\${a.raw}` } : a);
        }
        break;
      case 'atom':
        atoms.push({ kind: 'text', raw: p.raw, units: p.raw.length });
        break;
      case 'code':
        atoms.push({ kind: 'open', raw: p.fence, units: p.fence.length, close: p.fence, closeUnits: p.fence.length });
        appendAll(atoms, textAtoms(p.content, { code: true, codeSpaceBreaks: true }));
        atoms.push({ kind: 'close', raw: p.fence, units: p.fence.length });
        break;
      case 'link': {
        if (p.url.length > maxUrl) {
          appendAll(appendAll(atoms, inlineAtoms(p.label, maxUrl)), textAtoms(` (${p.url})`));
          break;
        }
        const close = `](${p.target})`;
        atoms.push({ kind: 'open', raw: '[', units: 1, close, closeUnits: close.length });
        appendAll(atoms, inlineAtoms(p.label, maxUrl));
        atoms.push({ kind: 'close', raw: close, units: close.length });
        break;
      }
      case 'autolink':
        if (p.url.length > maxUrl) appendAll(atoms, textAtoms(p.url));
        else atoms.push({ kind: 'text', raw: `<${p.url}>`, units: p.url.length + 2 });
        break;
      case 'delim':
        if (p.pair === 'open') atoms.push({ kind: 'open', raw: p.value, units: p.value.length, close: p.value, closeUnits: p.value.length });
        else if (p.pair === 'close') atoms.push({ kind: 'close', raw: p.value, units: p.value.length });
        else atoms.push({ kind: 'text', raw: p.value, units: p.value.length });
        break;
    }
  }
  return atoms;
}

function lex(s: string): Piece[] {
  const pieces: Piece[] = [];
  let text = '';
  const flush = () => {
    if (text) pieces.push({ type: 'text', text });
    text = '';
  };
  let i = 0;
  while (i < s.length) {
    const ch = s[i]!;
    if (!SPECIAL.has(ch)) {
      text += ch;
      i++;
      continue;
    }
    let m: RegExpExecArray | null;
    if (ch === '\\' && /[!-/:-@[-`{-~]/.test(s[i + 1] ?? '')) {
      flush();
      pieces.push({ type: 'atom', raw: s.slice(i, i + 2) });
      i += 2;
    } else if (ch === '`') {
      const fence = matchAt(BACKTICKS, s, i)![0];
      // A run too long to close and reopen in every message it is cut across is text.
      const end = fence.length > MAX_TICKS ? -1 : closingRun(s, i + fence.length, fence);
      if (end < 0) {
        text += fence;
        i += fence.length;
        continue;
      }
      flush();
      pieces.push({ type: 'code', fence, content: s.slice(i + fence.length, end) });
      i = end + fence.length;
    } else if (ch === '[' && (m = matchAt(LINK, s, i))) {
      flush();
      pieces.push({ type: 'link', label: m[1]!, target: `${m[2]!}${m[3] ?? ''}`, url: m[2]!.replace(/^<|>$/g, '') });
      i += m[0].length;
    } else if (ch === '<' && (m = matchAt(AUTOLINK, s, i))) {
      flush();
      pieces.push({ type: 'autolink', url: m[1]! });
      i += m[0].length;
    } else if (ch === '<' && (m = matchAt(MENTION, s, i))) {
      flush();
      pieces.push({ type: 'atom', raw: m[0] });
      i += m[0].length;
    } else if (ch === 'h' && !/\w/.test(s[i - 1] ?? '') && (m = matchAt(BARE_URL, s, i))) {
      const url = bareUrl(m[0]);
      text += url; // a bare URL is one word, whatever `_` or `*` it holds
      i += url.length;
    } else if (ch === '*' || ch === '_' || ch === '~' || ch === '|') {
      const run = matchAt(RUN, s, i)![0];
      const usable = ch === '*' || ch === '_' ? run.length <= 3 : run.length === 2;
      if (!usable) {
        text += run;
        i += run.length;
        continue;
      }
      flush();
      pieces.push(delimiter(run, s[i - 1], s[i + run.length]));
      i += run.length;
    } else {
      text += ch;
      i++;
    }
  }
  flush();
  return pieces;
}

/** A bare URL without what follows it in the sentence: closing markup (`**`), final punctuation, an unmatched `)`. */
function bareUrl(match: string): string {
  let url = match;
  for (;;) {
    if (URL_TAIL.test(url)) url = url.slice(0, -1);
    else if (url.endsWith(')') && url.split('(').length < url.split(')').length) url = url.slice(0, -1);
    else return url;
  }
}

/** Index of the next run of exactly `fence` backticks from `from`, or -1. */
function closingRun(s: string, from: number, fence: string): number {
  const re = /`+/g;
  re.lastIndex = from;
  for (let m = re.exec(s); m; m = re.exec(s)) if (m[0].length === fence.length) return m.index;
  return -1;
}

/** CommonMark's flanking rules, which Discord roughly follows. */
function delimiter(value: string, before = ' ', after = ' '): Piece {
  const spaceBefore = /\s/.test(before);
  const spaceAfter = /\s/.test(after);
  const punctBefore = PUNCTUATION.test(before);
  const punctAfter = PUNCTUATION.test(after);
  const left = !spaceAfter && (!punctAfter || spaceBefore || punctBefore);
  const right = !spaceBefore && (!punctBefore || spaceAfter || punctAfter);
  if (value[0] === '_') return { type: 'delim', value, canOpen: left && (!right || punctBefore), canClose: right && (!left || punctAfter) };
  if (value[0] === '*') return { type: 'delim', value, canOpen: left, canClose: right };
  return { type: 'delim', value, canOpen: !spaceAfter, canClose: !spaceBefore };
}

/** A delimiter run being paired: what of it is left, and the parts that closed or opened spans. */
interface Run {
  piece: Extract<Piece, { type: 'delim' }>;
  left: number;
  /** Closing parts, innermost first. */
  closes: string[];
  /** Opening parts, outermost first. */
  opens: string[];
}

/**
 * Pairs delimiters as CommonMark does: a closing run takes the nearest opener of its kind, two
 * characters at a time where both runs have two (`**`), one otherwise, so `***a** b*` and `**a *b***`
 * pair fully; openers skipped over stay text. `~~` and `||` pair whole.
 */
function pair(pieces: Piece[]): Piece[] {
  const runs = new Map<Piece, Run>();
  const openers: Run[] = [];
  for (const p of pieces) {
    if (p.type !== 'delim') continue;
    const run: Run = { piece: p, left: p.value.length, closes: [], opens: [] };
    runs.set(p, run);
    const ch = p.value[0]!;
    const emphasis = ch === '*' || ch === '_';
    while (p.canClose && run.left > 0) {
      let at = openers.length - 1;
      for (; at >= 0; at--) {
        const o = openers[at]!;
        if (o.piece.value[0] !== ch) continue;
        if (!emphasis) break;
        // The rule of 3: `*a**b*` is not `*a*` + `*b*`.
        const both = o.piece.canClose || p.canOpen;
        const sum = o.piece.value.length + p.value.length;
        if (!both || sum % 3 !== 0 || (o.piece.value.length % 3 === 0 && p.value.length % 3 === 0)) break;
      }
      if (at < 0) break;
      const o = openers[at]!;
      const use = !emphasis ? run.left : o.left >= 2 && run.left >= 2 ? 2 : 1;
      o.opens.unshift(ch.repeat(use));
      o.left -= use;
      run.closes.push(ch.repeat(use));
      run.left -= use;
      openers.length = o.left > 0 ? at + 1 : at;
    }
    if (run.left > 0 && p.canOpen) openers.push(run);
  }
  const out: Piece[] = [];
  for (const p of pieces) {
    const run = runs.get(p);
    if (!run) {
      out.push(p);
      continue;
    }
    for (const value of run.closes) out.push({ ...run.piece, value, pair: 'close' });
    if (run.left > 0) out.push({ type: 'text', text: run.piece.value.slice(0, run.left) });
    for (const value of run.opens) out.push({ ...run.piece, value, pair: 'open' });
  }
  return out;
}
