import MarkdownIt from 'markdown-it';
import { outboundText, type OutboundMessage } from '../../src/core/message.ts';
import { appendAll, splitMarkup, textAtoms, type MarkupAtom } from '../../src/core/text-split.ts';
import { inlineAtoms } from './inline-atoms.ts';

/** Discord's limit on the content of one message, in characters. */
export const DISCORD_MESSAGE_LIMIT = 2000;

/** A code fence: the markup that closes or reopens it. */
interface Fence {
  /** The fence's prefix (list markers as spaces, so that a reopened block does not start a new item) and its backticks. */
  close: string;
  /** The opening line with its prefix as in `close`. */
  reopen: string;
  /** The quote marker of the lines inside (`> `), or ''. */
  quote: string;
}

/** Block structure only (where fences open and close): the inline pass, a third of a parse, is not needed. */
const markdown = new MarkdownIt();
markdown.core.ruler.disable(['inline', 'linkify', 'replacements', 'smartquotes', 'text_join']);

/**
 * The messages one reply becomes on Discord. The model writes markdown, which Discord renders as it
 * is; only the length needs care.
 */
export function renderDiscord(message: OutboundMessage, limit = DISCORD_MESSAGE_LIMIT): string[] {
  return splitDiscordText(outboundText(message), limit);
}

/**
 * Splits text into chunks of at most `limit` characters (UTF-16 units, never fewer than Discord counts):
 * between paragraphs or lines where possible, else at a space, else between grapheme clusters. A code
 * block cut in two is closed at the end of one chunk and reopened (with its language) at the start of the
 * next, so every chunk renders on its own; a code block, a code span, a link or an emphasis that fits in
 * one chunk is not cut, and one that does not is closed and reopened the same way.
 */
export function splitDiscordText(text: string, limit = DISCORD_MESSAGE_LIMIT): string[] {
  const source = text.replace(/\r\n?/g, '\n');
  if (source.length <= limit) return source.trim() ? [source] : [];
  return splitMarkup(discordAtoms(source, Math.floor(limit / 2)), limit);
}

/** A quoted line's marker (Discord quotes a line that starts with `> `). */
const QUOTE = /^>(?: |$)/;
/** The quote marker of a line inside a quoted code block. */
const CODE_QUOTE = /^[ \t]*>[ \t]?/;

/** The whole message as atoms: fenced code blocks line by line, everything else paragraph by paragraph. */
function discordAtoms(source: string, maxUrl: number): MarkupAtom[] {
  const lines = source.split('\n');
  const { after, opener, closer } = fenceStates(source, lines);
  const atoms: MarkupAtom[] = [];
  let prose: string[] = [];
  const newline = (code: boolean) => {
    const blank = !code && atoms.at(-1)?.raw === '\n';
    atoms.push({ kind: 'text', raw: '\n', units: 1, breakAfter: code ? 1 : blank ? 3 : 2, trim: true });
  };
  const flushProse = () => {
    // Emphasis and links do not cross a blank line.
    for (const part of prose.join('\n').split(/(\n[ \t]*\n)/)) {
      if (!part.trim()) for (const _ of part.replace(/[^\n]/g, '')) newline(false);
      else appendAll(atoms, paragraphAtoms(part, maxUrl));
    }
    prose = [];
  };
  for (const [i, line] of lines.entries()) {
    const fence = after[i];
    const previous = i > 0 ? after[i - 1] : undefined;
    if (previous && closer[i]) {
      // The closing line as written, unless it is padded beyond any use (it cannot be cut).
      const written = line.trimEnd();
      const raw = `\n${written.length <= previous.close.length + 4 ? written : previous.close}`;
      atoms.push({ kind: 'close', raw, units: raw.length });
      continue;
    }
    // A block left open where its quote or list item ends is closed there.
    if (previous && (opener[i] || fence !== previous)) atoms.push({ kind: 'close', raw: `\n${previous.close}`, units: previous.close.length + 1 });
    if (opener[i] && fence) {
      if (prose.length) flushProse();
      if (atoms.length) newline(false);
      const close = { close: `\n${fence.close}`, closeUnits: fence.close.length + 1 };
      const reopen = `${fence.reopen}\n${fence.quote}`;
      if (fence.reopen.length <= maxUrl / 2) atoms.push({ kind: 'open', raw: line, units: line.length, ...close, reopen, reopenUnits: reopen.length });
      else {
        // An opening line too long to repeat (a runaway info string) is sent once and reopened bare.
        const bare = `${fence.close.trimStart()}\n${fence.quote}`;
        atoms.push({ kind: 'open', raw: '', units: 0, ...close, reopen: bare, reopenUnits: bare.length });
        appendAll(atoms, textAtoms(line, { code: true }));
      }
    } else if (fence) {
      newline(true);
      const marker = fence.quote ? CODE_QUOTE.exec(line)?.[0] : undefined;
      // The line's quote marker is dropped at the start of a message, where the reopened block brings its own.
      if (marker) atoms.push({ kind: 'text', raw: marker, units: marker.length, trim: true });
      appendAll(atoms, textAtoms(marker ? line.slice(marker.length) : line, { code: true }));
    } else {
      if (!prose.length && atoms.length) newline(false);
      prose.push(line);
    }
  }
  flushProse();
  return atoms;
}

/**
 * One paragraph: quoted lines (`> `) are a span whose marker is repeated at the start of a message cut
 * inside them, so a long quoted line stays quoted in both messages.
 */
function paragraphAtoms(paragraph: string, maxUrl: number): MarkupAtom[] {
  const atoms: MarkupAtom[] = [];
  const lines = paragraph.split('\n');
  for (let i = 0; i < lines.length;) {
    const quoted = QUOTE.test(lines[i]!);
    let end = i + 1;
    while (end < lines.length && QUOTE.test(lines[end]!) === quoted) end++;
    const group = lines.slice(i, end);
    if (i > 0) appendAll(atoms, textAtoms('\n'));
    if (!quoted) appendAll(atoms, inlineAtoms(group.join('\n'), maxUrl));
    else {
      const markers = group.map((l) => QUOTE.exec(l)![0]);
      atoms.push({ kind: 'open', raw: markers[0]!, units: markers[0]!.length, close: '', closeUnits: 0, reopen: '> ', reopenUnits: 2 });
      let line = 0;
      for (const a of inlineAtoms(group.map((l, k) => l.slice(markers[k]!.length)).join('\n'), maxUrl)) {
        atoms.push(a);
        const marker = a.kind === 'text' && a.raw === '\n' ? markers[++line] : undefined;
        if (marker) atoms.push({ kind: 'text', raw: marker, units: marker.length, trim: true });
      }
      atoms.push({ kind: 'close', raw: '', units: 0 });
    }
    i = end;
  }
  return atoms;
}

/** For every line: the fence open after it (if any), whether it opens one, and whether it closes one. Found with markdown-it. */
function fenceStates(source: string, lines: readonly string[]): { after: (Fence | undefined)[]; opener: boolean[]; closer: boolean[] } {
  const after = new Array<Fence | undefined>(lines.length).fill(undefined);
  const opener = new Array<boolean>(lines.length).fill(false);
  const closer = new Array<boolean>(lines.length).fill(false);
  for (const token of markdown.parse(source, {})) {
    // A fence of more than 16 backticks is read as prose (its runs then as text): the markup that closes
    // and reopens it at each cut would leave no room for the code.
    if (token.type !== 'fence' || !token.map || token.markup.length > 16) continue;
    const [start, end] = token.map;
    const openLine = (lines[start] ?? token.markup).trimEnd();
    const at = Math.max(0, openLine.indexOf(token.markup));
    // `1. ```bash`: the list marker is not repeated when the block is closed or reopened.
    const prefix = openLine.slice(0, at).replace(/[^>\s]/g, ' ');
    const quote = prefix.includes('>') ? `${prefix.slice(0, prefix.lastIndexOf('>') + 1)} ` : '';
    const fence: Fence = { close: `${prefix}${token.markup}`, reopen: `${prefix}${openLine.slice(at)}`, quote };
    const last = end - 1;
    const run = /^(?:[ \t]*>)*[ \t]*(`{3,}|~{3,})[ \t]*$/.exec(lines[last] ?? '')?.[1];
    const closed = last > start && run !== undefined && run[0] === token.markup[0] && run.length >= token.markup.length;
    const stop = closed ? last : end;
    opener[start] = true;
    closer[last] ||= closed;
    for (let i = start; i < stop; i++) after[i] = fence;
  }
  return { after, opener, closer };
}
