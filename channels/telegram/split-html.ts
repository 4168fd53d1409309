import { appendAll, splitMarkup, textAtoms, type MarkupAtom } from '../../src/core/text-split.ts';

/** Telegram's limit on the text of one message, in UTF-16 units after entity parsing. */
export const TELEGRAM_TEXT_LIMIT = 4096;

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;' };

function escapeText(grapheme: string): string {
  return ENTITIES[grapheme] ?? (grapheme.length > 1 ? grapheme.replace(/[&<>]/g, (c) => ENTITIES[c]!) : grapheme);
}

/**
 * Splits Telegram HTML into messages whose text, as Telegram counts it (after entity parsing, in UTF-16
 * units), is at most `limit`; a link's URL counts too, since Telegram also bounds the size of a message's
 * entities. Every message is balanced: tags open at a cut are closed at its end and reopened at the start
 * of the next, so a code block split across messages stays a code block in each. Cuts prefer a blank
 * line, then a line break, then a space, and avoid the inside of a link, code or emphasis that fits in
 * one message (such a code block moves to the next message rather than being cut); a word is cut only
 * when it alone is longer than a message, and then between grapheme clusters. Pure.
 */
export function splitHtml(html: string, limit = TELEGRAM_TEXT_LIMIT): string[] {
  return splitMarkup(htmlAtoms(html, limit / 2), limit);
}

/** Text of Telegram HTML as the user would see it, a link's URL kept after its text: `docs (https://…)`. Pure. */
export function htmlToReadableText(html: string): string {
  return htmlToPlainText(html.replace(/<a\s[^>]*?href="([^"]*)"[^>]*>([\s\S]*?)<\/a>/gi, (_m, href: string, label: string) => {
    const shown = htmlToPlainText(label).trim();
    return !shown || shown === htmlToPlainText(href) ? href : `${label} (${href})`;
  }));
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

/** A tag open while reading: its name, and for a link written as text, the ` (URL)` that follows its text. */
interface OpenTag {
  name: string;
  suffix?: string;
}

/**
 * Tags become open/close atoms (a link's open tag counts its URL), text becomes one atom per grapheme
 * cluster, re-escaped. A link whose URL is longer than `maxHref` (it would leave too little room in
 * each message) becomes its text followed by the URL in parentheses. Tags closed out of order are closed
 * with the tags inside them; stray closing tags are dropped.
 */
function htmlAtoms(html: string, maxHref: number): MarkupAtom[] {
  const atoms: MarkupAtom[] = [];
  const open: OpenTag[] = [];
  const inside = (name: string) => open.some((t) => t.name === name);
  for (const [piece] of html.matchAll(/<[^>]*>?|[^<]+/g)) {
    const tag = /^<(\/?)([a-zA-Z][\w-]*)/.exec(piece);
    if (!tag) {
      const pre = inside('pre');
      const code = pre || inside('code');
      appendAll(atoms, textAtoms(htmlToPlainText(piece), { escape: escapeText, count: 'text', code, codeSpaceBreaks: !pre }));
      continue;
    }
    const name = tag[2]!.toLowerCase();
    if (!tag[1]) {
      const href = name === 'a' ? htmlToPlainText(/\shref="([^"]*)"/i.exec(piece)?.[1] ?? '') : '';
      if (href.length > maxHref) {
        open.push({ name, suffix: ` (${href})` });
        continue;
      }
      atoms.push({ kind: 'open', raw: piece, units: href.length, close: `</${name}>`, closeUnits: 0, block: name === 'pre' });
      open.push({ name });
      continue;
    }
    let at = open.length - 1;
    while (at >= 0 && open[at]!.name !== name) at--;
    if (at < 0) continue;
    while (open.length > at) {
      const t = open.pop()!;
      if (t.suffix === undefined) atoms.push({ kind: 'close', raw: `</${t.name}>`, units: 0 });
      else appendAll(atoms, textAtoms(t.suffix, { escape: escapeText, count: 'text' }));
    }
  }
  return atoms;
}
