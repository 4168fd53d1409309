import MarkdownIt from 'markdown-it';
import { outboundText, type OutboundMessage } from '../../src/core/message.ts';
import { appendAll, splitMarkup, textAtoms, type MarkupAtom } from '../../src/core/text-split.ts';
import { inlineAtoms } from './inline-atoms.ts';

/** Discord's limit on the content of one message, in characters. */
export const DISCORD_MESSAGE_LIMIT = 2000;

/** A code fence: the line that opens it and the line that closes it. */
interface Fence {
  open: string;
  close: string;
}

const markdown = new MarkdownIt();

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

/** The whole message as atoms: fenced code blocks line by line, everything else paragraph by paragraph. */
function discordAtoms(source: string, maxUrl: number): MarkupAtom[] {
  const lines = source.split('\n');
  const { after, opener } = fenceStates(source, lines);
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
      else appendAll(atoms, inlineAtoms(part, maxUrl));
    }
    prose = [];
  };
  for (const [i, line] of lines.entries()) {
    const fence = after[i];
    const inside = i > 0 && after[i - 1] !== undefined && !opener[i];
    if (opener[i] && fence) {
      if (prose.length) flushProse();
      if (atoms.length) newline(false);
      const close = { close: `\n${fence.close}`, closeUnits: fence.close.length + 1 };
      if (line.length <= maxUrl / 2) atoms.push({ kind: 'open', raw: line, units: line.length, ...close, reopen: `${line}\n`, reopenUnits: line.length + 1 });
      else {
        // An opening line too long to repeat (a runaway info string) is sent once and reopened bare.
        atoms.push({ kind: 'open', raw: '', units: 0, ...close, reopen: `${fence.close.trimStart()}\n`, reopenUnits: fence.close.trimStart().length + 1 });
        appendAll(atoms, textAtoms(line, { code: true }));
      }
    } else if (inside && fence) {
      newline(true);
      appendAll(atoms, textAtoms(line, { code: true }));
    } else if (inside) {
      atoms.push({ kind: 'close', raw: `\n${line}`, units: line.length + 1 });
    } else {
      if (!prose.length && atoms.length) newline(false);
      prose.push(line);
    }
  }
  flushProse();
  return atoms;
}

/** For every line: the fence open after it (if any), and whether it opens one. Found with markdown-it. */
function fenceStates(source: string, lines: readonly string[]): { after: (Fence | undefined)[]; opener: boolean[] } {
  const after = new Array<Fence | undefined>(lines.length).fill(undefined);
  const opener = new Array<boolean>(lines.length).fill(false);
  for (const token of markdown.parse(source, {})) {
    if (token.type !== 'fence' || !token.map) continue;
    const [start, end] = token.map;
    const openLine = (lines[start] ?? token.markup).trimEnd();
    const prefix = openLine.slice(0, Math.max(0, openLine.indexOf(token.markup)));
    const fence: Fence = { open: openLine, close: `${prefix}${token.markup}` };
    const last = end - 1;
    const closed = last > start && (lines[last] ?? '').trim().replace(/^>\s*/, '').startsWith(token.markup);
    const stop = closed ? last : end;
    opener[start] = true;
    for (let i = start; i < stop; i++) after[i] = fence;
  }
  return { after, opener };
}
