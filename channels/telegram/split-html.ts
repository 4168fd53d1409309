/** Telegram's limit on the text of one message. */
export const TELEGRAM_TEXT_LIMIT = 4096;

type Atom =
  | { kind: 'open'; name: string; raw: string }
  | { kind: 'close'; name: string; raw: string }
  /** One character or one entity; `space` tells where a break may go. */
  | { kind: 'text'; raw: string; space?: ' ' | '\n' };

interface OpenTag {
  name: string;
  raw: string;
}

/** A place where the current chunk may end: after a space or a newline. */
interface Break {
  /** Index of the first atom after the break. */
  atom: number;
  /** Number of parts of the chunk before the break. */
  parts: number;
  length: number;
  stack: OpenTag[];
  /** 3: a blank line outside code; 2: a newline outside code; 1: a newline in code; 0: a space. */
  rank: number;
}

/**
 * Splits Telegram HTML into chunks of at most `limit` characters (the HTML itself, which is never shorter
 * than the text Telegram counts). Every chunk is balanced: tags open at a cut are closed at its end and
 * reopened at the start of the next chunk, so a code block split across messages stays a code block in
 * each. Cuts prefer a blank line, then a line break, then a space; a code block that fits in one message
 * moves to the next one rather than being cut; a word is cut only when it alone is longer than a message.
 * Entities and surrogate pairs are never cut. Pure.
 */
export function splitHtml(html: string, limit = TELEGRAM_TEXT_LIMIT): string[] {
  const atoms = atomize(html);
  const chunks: string[] = [];
  let stack: OpenTag[] = [];
  let parts: string[] = [];
  let length = 0;
  let breaks: Break[] = [];
  let first = 0;

  const begin = (open: OpenTag[], at: number) => {
    stack = open.slice();
    parts = open.map((t) => t.raw);
    length = parts.reduce((n, p) => n + p.length, 0);
    breaks = [];
    first = at;
  };
  const emit = (body: string[], open: OpenTag[]) => {
    const chunk = tidy(body.join('').replace(/\s+$/, '') + closingTags(open));
    if (htmlToPlainText(chunk).trim()) chunks.push(chunk);
  };

  begin([], 0);
  let i = 0;
  while (i < atoms.length) {
    const atom = atoms[i]!;
    if (atom.kind === 'text' && atom.space && i === first && !inPre(stack)) {
      first = ++i; // no leading blank at the start of a message
      continue;
    }
    const next = apply(stack, atom);
    if (length + atom.raw.length + closingLength(next) > limit && i > first) {
      const cut = chooseBreak(breaks, stack, limit);
      if (cut) {
        emit(parts.slice(0, cut.parts), cut.stack);
        begin(cut.stack, cut.atom);
        i = cut.atom;
      } else {
        emit(parts, stack);
        begin(stack, i);
      }
      continue;
    }
    parts.push(atom.raw);
    length += atom.raw.length;
    stack = next;
    i++;
    if (atom.kind === 'text' && atom.space) {
      const code = inPre(stack);
      const blank = atom.space === '\n' && parts.at(-2) === '\n';
      const rank = atom.space === ' ' ? 0 : code ? 1 : blank ? 3 : 2;
      if (!(code && atom.space === ' ')) breaks.push({ atom: i, parts: parts.length, length, stack: stack.slice(), rank });
    }
  }
  emit(parts, stack);
  return chunks;
}

/** Text of Telegram HTML as the user would see it: tags dropped, entities decoded. Pure. */
export function htmlToPlainText(html: string): string {
  return html.replace(/<[^>]*>/g, '').replace(/&(lt|gt|amp|quot|#\d+|#x[0-9a-f]+);/gi, (_m, name: string) => {
    const lower = name.toLowerCase();
    if (lower === 'lt') return '<';
    if (lower === 'gt') return '>';
    if (lower === 'amp') return '&';
    if (lower === 'quot') return '"';
    const code = lower.startsWith('#x') ? parseInt(lower.slice(2), 16) : parseInt(lower.slice(1), 10);
    return Number.isFinite(code) && code <= 0x10ffff ? String.fromCodePoint(code) : '';
  });
}

function chooseBreak(breaks: readonly Break[], stack: readonly OpenTag[], limit: number): Break | undefined {
  if (breaks.length === 0) return undefined;
  // Cutting inside a code block: if the block started in this chunk, end the chunk before it instead.
  if (inPre(stack)) {
    const outside = breaks.filter((b) => b.rank >= 2);
    if (outside.length) return outside.at(-1);
  }
  const late = breaks.filter((b) => b.length >= limit / 2);
  const pool = late.length ? late : breaks;
  let best = pool[0]!;
  for (const b of pool) if (b.rank >= best.rank) best = b;
  return best;
}

function atomize(html: string): Atom[] {
  const atoms: Atom[] = [];
  let i = 0;
  while (i < html.length) {
    const ch = html[i]!;
    if (ch === '<') {
      const end = html.indexOf('>', i);
      const raw = end < 0 ? html.slice(i) : html.slice(i, end + 1);
      const m = /^<(\/?)([a-zA-Z][\w-]*)/.exec(raw);
      if (m) atoms.push({ kind: m[1] ? 'close' : 'open', name: m[2]!.toLowerCase(), raw });
      else atoms.push({ kind: 'text', raw });
      i += raw.length;
      continue;
    }
    if (ch === '&') {
      const m = /^&(?:[a-zA-Z]+|#\d+|#x[0-9a-fA-F]+);/.exec(html.slice(i, i + 12));
      const raw = m ? m[0] : ch;
      atoms.push({ kind: 'text', raw });
      i += raw.length;
      continue;
    }
    const raw = String.fromCodePoint(html.codePointAt(i)!);
    atoms.push(raw === '\n' ? { kind: 'text', raw, space: '\n' } : /\s/.test(raw) ? { kind: 'text', raw, space: ' ' } : { kind: 'text', raw });
    i += raw.length;
  }
  return atoms;
}

function apply(stack: OpenTag[], atom: Atom): OpenTag[] {
  if (atom.kind === 'open') return [...stack, { name: atom.name, raw: atom.raw }];
  if (atom.kind === 'close') {
    const at = stack.map((t) => t.name).lastIndexOf(atom.name);
    return at < 0 ? stack : stack.slice(0, at);
  }
  return stack;
}

function inPre(stack: readonly OpenTag[]): boolean {
  return stack.some((t) => t.name === 'pre');
}

function closingTags(stack: readonly OpenTag[]): string {
  return [...stack].reverse().map((t) => `</${t.name}>`).join('');
}

function closingLength(stack: readonly OpenTag[]): number {
  return stack.reduce((n, t) => n + t.name.length + 3, 0);
}

/** Drops tags left empty by a cut (`<b></b>`). */
function tidy(html: string): string {
  let out = html;
  for (let before = ''; before !== out;) {
    before = out;
    out = out.replace(/<([a-z][\w-]*)(?:\s[^>]*)?>\s*<\/\1>/gi, '');
  }
  return out;
}
