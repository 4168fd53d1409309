import MarkdownIt from 'markdown-it';
import { outboundText, type OutboundMessage } from '../../src/core/message.ts';

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
 * Splits text into chunks of at most `limit` characters: between lines where possible, else at a
 * space, else anywhere. A code block cut in two is closed at the end of one chunk and reopened (with
 * its language) at the start of the next, so every chunk renders on its own.
 */
export function splitDiscordText(text: string, limit = DISCORD_MESSAGE_LIMIT): string[] {
  const source = text.replace(/\r\n?/g, '\n');
  if (source.length <= limit) return source.trim() ? [source] : [];
  const max = Math.max(limit, 64);
  const lines = source.split('\n');
  const { after, opener } = fenceStates(source, lines);
  const chunks: string[] = [];
  let cur: string[] = [];
  let header: Fence | undefined;
  let state: Fence | undefined;
  let lastWasOpener = false;

  const size = () => cur.reduce((n, l) => n + l.length, 0) + Math.max(0, cur.length - 1);
  const hasContent = () => cur.slice(header ? 1 : 0).some((l) => l.trim() !== '');
  const room = (fence: Fence | undefined) => max - size() - (cur.length ? 1 : 0) - (fence ? fence.close.length + 1 : 0);
  const push = (line: string, fence: Fence | undefined, isOpener: boolean) => {
    cur.push(line);
    state = fence;
    lastWasOpener = isOpener;
  };
  const flush = () => {
    let closeWith = state;
    let carry: string | undefined;
    // Never end a chunk with an empty block: an opening line moves to the next chunk.
    if (lastWasOpener && state) {
      carry = cur.pop();
      closeWith = undefined;
    }
    if (hasContent()) chunks.push(`${cur.join('\n').trimEnd()}${closeWith ? `\n${closeWith.close}` : ''}`);
    header = state;
    cur = carry !== undefined ? [carry] : state ? [state.open] : [];
    lastWasOpener = false;
  };

  for (const [i, line] of lines.entries()) {
    const next = after[i];
    const isOpener = opener[i] ?? false;
    if (line.length <= room(next)) { push(line, next, isOpener); continue; }
    if (hasContent()) flush();
    if (line.length <= room(next)) { push(line, next, isOpener); continue; }
    // One line longer than a message: wrap it. Inside a block it stays inside the block.
    const inner = state && next ? state : undefined;
    let rest = line;
    while (rest.length > 0) {
      const avail = room(inner);
      if (rest.length <= avail) { push(rest, inner, false); break; }
      if (avail < 16 && hasContent()) { flush(); continue; }
      const cut = breakPoint(rest, Math.max(avail, 1));
      push(rest.slice(0, cut).trimEnd(), inner, false);
      rest = rest.slice(cut).trimStart();
      flush();
    }
    state = next;
    lastWasOpener = isOpener;
  }
  if (hasContent()) flush();
  return chunks;
}

/** Where to cut a line to keep at most `avail` characters: the last space, else `avail` (not inside a surrogate pair). */
function breakPoint(text: string, avail: number): number {
  const window = text.slice(0, avail + 1);
  const space = Math.max(window.lastIndexOf(' '), window.lastIndexOf('\t'));
  if (space > 0) return space;
  const code = text.charCodeAt(avail - 1);
  return code >= 0xd800 && code <= 0xdbff && avail > 1 ? avail - 1 : avail;
}

/** For every line: the fence open after it (if any), and whether it opens one. Found with markdown-it. */
function fenceStates(source: string, lines: readonly string[]): { after: (Fence | undefined)[]; opener: boolean[] } {
  const after: (Fence | undefined)[] = new Array(lines.length).fill(undefined);
  const opener: boolean[] = new Array(lines.length).fill(false);
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
