import MarkdownIt from 'markdown-it';
import type { Token } from 'markdown-it';
import { appendAll, splitMarkup, textAtoms, type MarkupAtom, type TextAtomOptions } from '../../src/core/text-split.ts';

/** Slack's limit for the `text` of one message that Switchboard keeps to (SPEC §10), in characters. */
export const SLACK_TEXT_LIMIT = 4000;

const md = new MarkdownIt({ html: false, linkify: false, typographer: false });

/** Escapes the three characters Slack treats as markup: `&`, `<`, `>`. */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Markdown → Slack mrkdwn, unsplit; links are written as `renderSlackChunks` writes them for `limit` (pure). */
export function renderMrkdwn(markdown: string, limit = SLACK_TEXT_LIMIT): string {
  return slackAtoms(markdown, Math.floor(limit / 2)).map((a) => a.raw).join('');
}

/**
 * Markdown → mrkdwn messages of at most `limit` characters each (UTF-16 units). Blocks are kept whole
 * when they fit; a split never falls inside a link, code or emphasis that fits in one message, and one
 * that does not is closed at the end of a message and reopened at the start of the next (a link split
 * this way becomes two links to the same URL); a link whose URL is longer than half a message becomes
 * its text and the URL as plain text. Cuts fall between grapheme clusters. Pure.
 */
export function renderSlackChunks(markdown: string, limit = SLACK_TEXT_LIMIT): string[] {
  return splitMarkup(slackAtoms(markdown, Math.floor(limit / 2)), limit);
}

interface Context {
  /** Longer URLs are written out as text. */
  maxUrl: number;
  /** Slack syntax set aside before parsing. */
  kept: readonly Kept[];
  /** Inside a heading, which is bold already. */
  inBold?: boolean;
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;' };
const escapeGrapheme = (g: string) => ENTITIES[g] ?? (g.length > 1 ? escapeMrkdwn(g) : g);
const text = (s: string, options: TextAtomOptions = {}): MarkupAtom[] => textAtoms(s, { escape: escapeGrapheme, ...options });
const open = (raw: string, close: string, block = false): MarkupAtom => ({ kind: 'open', raw, units: raw.length, close, closeUnits: close.length, block });
const close = (raw: string): MarkupAtom => ({ kind: 'close', raw, units: raw.length });
const span = (start: string, end: string, inner: MarkupAtom[]): MarkupAtom[] => (inner.length ? [open(start, end), ...inner, close(end)] : []);

/** The rendered message as atoms for the splitter; blocks separated by a blank line. */
function slackAtoms(markdown: string, maxUrl: number): MarkupAtom[] {
  const { source, kept } = keepSlackSyntax(markdown);
  const tokens = md.parse(source, {});
  return joinBlocks(renderRange(tokens, 0, tokens.length, { maxUrl, kept }), '\n\n');
}

/** Code spans, left as written, or text in Slack's syntax (links, channel references, mentions). */
const CODE_OR_SLACK = new RegExp([
  /(?<code>(?<ticks>`+)[^`][\s\S]*?\k<ticks>(?!`))/.source,
  /<(?<url>(?:https?:\/\/|mailto:)[^\s<>|]+)(?:\|(?<label>[^<>\n]*))?>/.source,
  /<#(?<channel>[CG][A-Z0-9]{1,20})(?:\|(?<name>[^<>\n|]{0,100}))?>/.source,
  /(?<mention><[@!][^<>\s|]{1,40}(?:\|[^<>\n]{0,100})?>)/.source,
].join('|'), 'gi');
/** A line that opens or closes a code fence, after any quote or list markers: the fence. */
const FENCE_LINE = /^(?:[ \t]*(?:>|[-*+]|\d{1,9}[.)])(?=[ \t]|$))*[ \t]*(`{3,}|~{3,})([^`]*)$/;
/** A span of Slack syntax set aside while markdown-it reads the rest: `\uE000` index `\uE001`. */
const PLACEHOLDER = /\uE000(\d+)\uE001/g;

/** Slack syntax found in the source before markdown-it reads it (which would decode `%7C`, or see emphasis in a label). */
type Kept =
  | { type: 'link'; url: string; label: string; raw: string }
  | { type: 'channel'; id: string; name: string; raw: string }
  | { type: 'mention'; raw: string };

/** The source with Slack syntax outside code (fenced blocks, code spans) replaced by placeholders (`kept[n]`). */
function keepSlackSyntax(markdown: string): { source: string; kept: Kept[] } {
  const kept: Kept[] = [];
  if (!markdown.includes('<') || /[\uE000\uE001]/.test(markdown)) return { source: markdown, kept };
  const replace = (paragraph: string) => paragraph.replace(CODE_OR_SLACK, (raw: string, ...args: unknown[]) => {
    const g = args.at(-1) as Record<string, string | undefined>;
    if (g.code !== undefined) return raw;
    if (g.url !== undefined) kept.push({ type: 'link', url: g.url, label: g.label ?? '', raw });
    else if (g.channel !== undefined) kept.push({ type: 'channel', id: g.channel, name: g.name ?? '', raw });
    else kept.push({ type: 'mention', raw });
    return `\uE000${kept.length - 1}\uE001`;
  });
  const out: string[] = [];
  let paragraph: string[] = [];
  let fence: string | undefined;
  /** The fence is in a quote, which (and so the fence) ends at the first line without `>`. */
  let quoted = false;
  const flush = () => {
    if (paragraph.length) out.push(replace(paragraph.join('\n')));
    paragraph = [];
  };
  for (const line of markdown.split('\n')) {
    const m = FENCE_LINE.exec(line.trimEnd());
    if (fence !== undefined && quoted && !/^[ \t]*>/.test(line)) fence = undefined;
    if (fence !== undefined) {
      if (m && m[1]![0] === fence[0] && m[1]!.length >= fence.length && !m[2]!.trim()) fence = undefined;
      out.push(line);
    } else if (m && !(m[1]![0] === '`' && m[2]!.includes('`'))) {
      flush();
      fence = m[1]!;
      quoted = /^[ \t]*>/.test(line);
      out.push(line);
    } else if (!line.trim()) {
      flush();
      out.push(line);
    } else paragraph.push(line);
  }
  flush();
  return { source: out.join('\n'), kept };
}

/** Text with the kept spans written back: as written (`raw`, in code) or as what Slack shows (`shown`). */
function restore(content: string, kept: readonly Kept[], as: 'raw' | 'shown'): string {
  if (!kept.length) return content;
  return content.replace(PLACEHOLDER, (_m, n: string) => {
    const k = kept[Number(n)];
    if (!k) return '';
    if (as === 'raw' || k.type === 'mention') return k.raw;
    return k.type === 'link' ? k.label || k.url.replace(/^mailto:/i, '') : `#${k.name || k.id}`;
  });
}

function joinBlocks(blocks: MarkupAtom[][], separator: string): MarkupAtom[] {
  const out: MarkupAtom[] = [];
  for (const [i, b] of blocks.entries()) {
    if (i) appendAll(out, text(separator));
    appendAll(out, b);
  }
  return out;
}

/**
 * Puts `first` before the first line and `rest` before every other line, the code fences inside
 * included. The prefix is a span that costs nothing to close, so a message cut inside a line (or inside a
 * code block) starts with `rest` again; the prefix after a line break is dropped at the start or end of a
 * message, where the reopened span (or nothing) takes its place.
 */
function prefixLines(atoms: MarkupAtom[], first: string, rest: string): MarkupAtom[] {
  const out: MarkupAtom[] = [{ kind: 'open', raw: first, units: first.length, close: '', closeUnits: 0, reopen: rest, reopenUnits: rest.length }];
  const within = (raw: string) => raw.replace(/\n/g, `\n${rest}`);
  for (const a of atoms) {
    if (a.kind === 'text') {
      out.push(a);
      if (a.raw === '\n') out.push({ kind: 'text', raw: rest, units: rest.length, trim: true });
    } else if (a.kind === 'close') out.push(a.raw.includes('\n') ? close(within(a.raw)) : a);
    else if (!a.raw.includes('\n') && !a.close.includes('\n') && !a.reopen?.includes('\n')) out.push(a);
    else {
      const reopen = within(a.reopen ?? a.raw);
      out.push({ ...a, raw: within(a.raw), units: within(a.raw).length, close: within(a.close), closeUnits: within(a.close).length, reopen, reopenUnits: reopen.length });
    }
  }
  out.push(close(''));
  return out;
}

function renderRange(tokens: Token[], start: number, end: number, ctx: Context): MarkupAtom[][] {
  const blocks: MarkupAtom[][] = [];
  let i = start;
  while (i < end) {
    const token = tokens[i]!;
    const last = token.nesting === 1 ? closingIndex(tokens, i) : i;
    switch (token.type) {
      case 'paragraph_open':
        blocks.push(renderInline(tokens[i + 1]?.children ?? [], ctx));
        break;
      case 'heading_open':
        blocks.push(span('*', '*', renderInline(tokens[i + 1]?.children ?? [], { ...ctx, inBold: true })));
        break;
      case 'bullet_list_open':
      case 'ordered_list_open':
        blocks.push(renderList(tokens, i, last, ctx));
        break;
      case 'blockquote_open':
        blocks.push(prefixLines(joinBlocks(renderRange(tokens, i + 1, last, ctx), '\n\n'), '> ', '> '));
        break;
      case 'fence':
      case 'code_block':
        blocks.push(codeBlock(restore(token.content, ctx.kept, 'raw')));
        break;
      case 'table_open':
        blocks.push(renderTable(tokens, i, last, ctx.kept));
        break;
      case 'hr':
        blocks.push(text('──────────'));
        break;
      case 'html_block':
        blocks.push(text(restore(token.content, ctx.kept, 'raw').trimEnd()));
        break;
      default:
        break;
    }
    i = last + 1;
  }
  return blocks.filter((b) => b.some((a) => a.kind === 'text' && a.raw.trim() !== ''));
}

/** Index of the token closing the one at `open` (same level, nesting -1). */
function closingIndex(tokens: Token[], start: number): number {
  let depth = 0;
  for (let i = start; i < tokens.length; i++) {
    depth += tokens[i]!.nesting;
    if (depth === 0) return i;
  }
  return tokens.length - 1;
}

function renderList(tokens: Token[], start: number, end: number, ctx: Context): MarkupAtom[] {
  const ordered = tokens[start]!.type === 'ordered_list_open';
  let number = Number(tokens[start]!.attrGet('start') ?? 1);
  const items: MarkupAtom[][] = [];
  let i = start + 1;
  while (i < end) {
    const itemClose = closingIndex(tokens, i);
    if (tokens[i]!.type === 'list_item_open') {
      const marker = ordered ? `${number++}. ` : '• ';
      items.push(prefixLines(joinBlocks(renderRange(tokens, i + 1, itemClose, ctx), '\n'), marker, ' '.repeat(4)));
    }
    i = itemClose + 1;
  }
  return joinBlocks(items, '\n');
}

/** Slack has no tables: a table becomes a code block with aligned columns. */
function renderTable(tokens: Token[], start: number, end: number, kept: readonly Kept[]): MarkupAtom[] {
  const rows: string[][] = [];
  let row: string[] | undefined;
  for (let i = start; i < end; i++) {
    const t = tokens[i]!;
    if (t.type === 'tr_open') row = [];
    else if (t.type === 'tr_close' && row) rows.push(row);
    else if (t.type === 'inline' && row) row.push(plainText(t.children ?? [], kept));
  }
  // Widths in code points, as a monospace font shows them (an emoji is one column, not two UTF-16 units).
  const width = (cell: string) => [...cell].length;
  const widths: number[] = [];
  for (const r of rows) r.forEach((cell, c) => { widths[c] = Math.max(widths[c] ?? 0, width(cell)); });
  const lines = rows.map((r) => r.map((cell, c) => cell + ' '.repeat((widths[c] ?? 0) - width(cell))).join(' | ').trimEnd());
  if (lines.length > 1) lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('-+-'));
  return codeBlock(lines.join('\n'));
}

function codeBlock(content: string): MarkupAtom[] {
  return [open('```\n', '\n```', true), ...text(content.replace(/\n+$/, ''), { code: true }), close('\n```')];
}

function renderInline(children: Token[], ctx: Context): MarkupAtom[] {
  const out: MarkupAtom[] = [];
  for (let i = 0; i < children.length; i++) {
    const t = children[i]!;
    switch (t.type) {
      case 'text': appendAll(out, slackText(t.content, ctx)); break;
      case 'softbreak':
      case 'hardbreak': appendAll(out, text('\n')); break;
      case 'code_inline': appendAll(out, span('`', '`', text(restore(t.content, ctx.kept, 'raw'), { code: true, codeSpaceBreaks: true }))); break;
      case 'strong_open': if (!ctx.inBold) out.push(open('*', '*')); break;
      case 'strong_close': if (!ctx.inBold) out.push(close('*')); break;
      case 'em_open': out.push(open('_', '_')); break;
      case 'em_close': out.push(close('_')); break;
      case 's_open': out.push(open('~', '~')); break;
      case 's_close': out.push(close('~')); break;
      case 'link_open': {
        const end = children.findIndex((c, n) => n > i && c.type === 'link_close');
        const last = end === -1 ? children.length : end;
        const label = plainText(children.slice(i + 1, last), ctx.kept);
        appendAll(out, link(String(t.attrGet('href') ?? ''), label, ctx));
        i = last;
        break;
      }
      case 'image': appendAll(out, link(String(t.attrGet('src') ?? ''), plainText(t.children ?? [], ctx.kept) || restore(t.content, ctx.kept, 'shown'), ctx)); break;
      default: appendAll(out, text(restore(t.content, ctx.kept, 'raw'))); break;
    }
  }
  return out;
}

/**
 * Text, escaped, except Slack links and channel references set aside before parsing, which Slack then
 * shows as links. Mentions (`<@U…>`) and broadcasts (`<!here>`, `<!channel>`) stay escaped: the model
 * must not ping anyone.
 */
function slackText(content: string, ctx: Context): MarkupAtom[] {
  const out: MarkupAtom[] = [];
  let from = 0;
  for (const m of content.matchAll(PLACEHOLDER)) {
    appendAll(out, text(content.slice(from, m.index)));
    const k = ctx.kept[Number(m[1])];
    if (k?.type === 'link') appendAll(out, link(k.url, k.label, ctx));
    else if (k?.type === 'channel') {
      const raw = `<#${k.id}${k.name ? `|${escapeMrkdwn(k.name)}` : ''}>`;
      out.push({ kind: 'text', raw, units: raw.length });
    } else if (k) appendAll(out, text(k.raw));
    from = m.index + m[0].length;
  }
  appendAll(out, text(content.slice(from)));
  return out;
}

/**
 * `<url|label>`, or `<url>` when the label is the URL; a relative or odd URL leaves only the label; a
 * URL longer than `maxUrl` is written out after the label as plain text.
 */
function link(href: string, label: string, ctx: Context): MarkupAtom[] {
  if (!/^(https?:|mailto:)/i.test(href)) return text(label || href);
  const url = href.replace(/&/g, '&amp;').replace(/</g, '%3C').replace(/>/g, '%3E').replace(/\|/g, '%7C');
  const bare = href.replace(/^mailto:/i, '');
  const unlabelled = !label || label === href || label === bare;
  if (url.length > ctx.maxUrl) return unlabelled ? text(href) : appendAll(text(label), text(` (${href})`));
  if (unlabelled) return [{ kind: 'text', raw: `<${url}>`, units: url.length + 2 }];
  return span(`<${url}|`, '>', text(label));
}

/** Inline tokens as plain text (link labels, table cells). */
function plainText(children: Token[], kept: readonly Kept[]): string {
  const shown = children.map((t) => (t.type === 'softbreak' || t.type === 'hardbreak' ? ' ' : t.type === 'image' ? plainText(t.children ?? [], kept) : t.content)).join('');
  return restore(shown, kept, 'shown');
}
