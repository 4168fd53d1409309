import MarkdownIt from 'markdown-it';
import type { Token } from 'markdown-it';

/** Slack's limit for the `text` of one message that Switchboard keeps to (SPEC §10). */
export const SLACK_TEXT_LIMIT = 4000;

/** One top-level block of rendered mrkdwn; code blocks are split differently from prose. */
export interface MrkdwnBlock {
  text: string;
  code: boolean;
}

const md = new MarkdownIt({ html: false, linkify: false, typographer: false });

/** Escapes the three characters Slack treats as markup: `&`, `<`, `>`. */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Markdown → Slack mrkdwn (pure). */
export function renderMrkdwn(markdown: string): string {
  return renderBlocks(markdown).map((b) => b.text).join('\n\n');
}

/** Markdown → mrkdwn messages of at most `limit` characters each, code blocks and words kept whole when possible (pure). */
export function renderSlackChunks(markdown: string, limit = SLACK_TEXT_LIMIT): string[] {
  return chunkBlocks(renderBlocks(markdown), limit);
}

/** Markdown → mrkdwn, one entry per top-level block. */
export function renderBlocks(markdown: string): MrkdwnBlock[] {
  const tokens = md.parse(markdown, {});
  return renderRange(tokens, 0, tokens.length).filter((b) => b.text.trim() !== '');
}

function renderRange(tokens: Token[], start: number, end: number): MrkdwnBlock[] {
  const blocks: MrkdwnBlock[] = [];
  let i = start;
  while (i < end) {
    const token = tokens[i]!;
    const close = token.nesting === 1 ? closingIndex(tokens, i) : i;
    switch (token.type) {
      case 'paragraph_open':
        blocks.push({ text: renderInline(tokens[i + 1]?.children ?? []), code: false });
        break;
      case 'heading_open':
        blocks.push({ text: bold(renderInline(tokens[i + 1]?.children ?? [], { inBold: true })), code: false });
        break;
      case 'bullet_list_open':
      case 'ordered_list_open':
        blocks.push({ text: renderList(tokens, i, close), code: false });
        break;
      case 'blockquote_open': {
        const inner = renderRange(tokens, i + 1, close).map((b) => b.text).join('\n\n');
        blocks.push({ text: inner.split('\n').map((line) => `> ${line}`).join('\n'), code: false });
        break;
      }
      case 'fence':
      case 'code_block':
        blocks.push({ text: codeBlock(token.content), code: true });
        break;
      case 'table_open':
        blocks.push({ text: renderTable(tokens, i, close), code: true });
        break;
      case 'hr':
        blocks.push({ text: '──────────', code: false });
        break;
      case 'html_block':
        blocks.push({ text: escapeMrkdwn(token.content.trimEnd()), code: false });
        break;
      default:
        break;
    }
    i = close + 1;
  }
  return blocks;
}

/** Index of the token closing the one at `open` (same level, nesting -1). */
function closingIndex(tokens: Token[], open: number): number {
  let depth = 0;
  for (let i = open; i < tokens.length; i++) {
    depth += tokens[i]!.nesting;
    if (depth === 0) return i;
  }
  return tokens.length - 1;
}

function renderList(tokens: Token[], open: number, close: number): string {
  const ordered = tokens[open]!.type === 'ordered_list_open';
  let number = Number(tokens[open]!.attrGet('start') ?? 1);
  const items: string[] = [];
  let i = open + 1;
  while (i < close) {
    const itemClose = closingIndex(tokens, i);
    if (tokens[i]!.type === 'list_item_open') {
      const marker = ordered ? `${number++}. ` : '• ';
      const body = renderRange(tokens, i + 1, itemClose).map((b) => b.text).join('\n');
      const indent = ' '.repeat(4);
      items.push(body.split('\n').map((line, n) => (n === 0 ? marker + line : indent + line)).join('\n'));
    }
    i = itemClose + 1;
  }
  return items.join('\n');
}

/** Slack has no tables: a table becomes a code block with aligned columns. */
function renderTable(tokens: Token[], open: number, close: number): string {
  const rows: string[][] = [];
  let row: string[] | undefined;
  for (let i = open; i < close; i++) {
    const t = tokens[i]!;
    if (t.type === 'tr_open') row = [];
    else if (t.type === 'tr_close' && row) rows.push(row);
    else if (t.type === 'inline' && row) row.push(plainText(t.children ?? []));
  }
  const widths: number[] = [];
  for (const r of rows) r.forEach((cell, c) => { widths[c] = Math.max(widths[c] ?? 0, cell.length); });
  const lines = rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join(' | ').trimEnd());
  if (lines.length > 1) lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('-+-'));
  return codeBlock(lines.join('\n'));
}

function codeBlock(content: string): string {
  return `\`\`\`\n${escapeMrkdwn(content.replace(/\n+$/, ''))}\n\`\`\``;
}

function bold(text: string): string {
  return text ? `*${text}*` : text;
}

function renderInline(children: Token[], options: { inBold?: boolean } = {}): string {
  let out = '';
  for (let i = 0; i < children.length; i++) {
    const t = children[i]!;
    switch (t.type) {
      case 'text': out += escapeMrkdwn(t.content); break;
      case 'softbreak':
      case 'hardbreak': out += '\n'; break;
      case 'code_inline': out += `\`${escapeMrkdwn(t.content)}\``; break;
      case 'strong_open':
      case 'strong_close': if (!options.inBold) out += '*'; break;
      case 'em_open':
      case 'em_close': out += '_'; break;
      case 's_open':
      case 's_close': out += '~'; break;
      case 'link_open': {
        const close = children.findIndex((c, n) => n > i && c.type === 'link_close');
        const end = close === -1 ? children.length : close;
        out += link(String(t.attrGet('href') ?? ''), plainText(children.slice(i + 1, end)));
        i = end;
        break;
      }
      case 'image': out += link(String(t.attrGet('src') ?? ''), plainText(t.children ?? []) || t.content); break;
      default: out += escapeMrkdwn(t.content); break;
    }
  }
  return out;
}

/** `<url|label>`, or `<url>` when the label is the URL; a relative or odd URL leaves only the label. */
function link(href: string, label: string): string {
  if (!/^(https?:|mailto:)/i.test(href)) return escapeMrkdwn(label || href);
  const url = href.replace(/&/g, '&amp;').replace(/</g, '%3C').replace(/>/g, '%3E').replace(/\|/g, '%7C');
  const bare = href.replace(/^mailto:/i, '');
  if (!label || label === href || label === bare) return `<${url}>`;
  return `<${url}|${escapeMrkdwn(label)}>`;
}

/** Inline tokens as plain text (link labels, table cells). */
function plainText(children: Token[]): string {
  return children.map((t) => (t.type === 'softbreak' || t.type === 'hardbreak' ? ' ' : t.type === 'image' ? plainText(t.children ?? []) : t.content)).join('');
}

/** Packs blocks into messages of at most `limit` characters; splits a block only when it alone is too long. */
export function chunkBlocks(blocks: MrkdwnBlock[], limit = SLACK_TEXT_LIMIT): string[] {
  const pieces = blocks.flatMap((b) => (b.text.length <= limit ? [b.text] : b.code ? splitCode(b.text, limit) : splitText(b.text, limit)));
  const chunks: string[] = [];
  let current = '';
  for (const piece of pieces) {
    if (!current) current = piece;
    else if (current.length + 2 + piece.length <= limit) current += `\n\n${piece}`;
    else {
      chunks.push(current);
      current = piece;
    }
  }
  if (current) chunks.push(current);
  return chunks;
}

/** Splits prose at a line break, else a space, else hard, never inside `&amp;` or `<url|label>`. */
export function splitText(text: string, limit: number): string[] {
  const out: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    const window = rest.slice(0, limit + 1);
    const newline = window.lastIndexOf('\n');
    const space = window.lastIndexOf(' ');
    let cut: number;
    if (newline >= limit / 2) cut = newline;
    else if (space >= limit / 4) cut = space;
    else if (newline > 0) cut = newline;
    else cut = safeHardCut(rest, limit);
    const piece = rest.slice(0, cut).trimEnd();
    if (piece) out.push(piece);
    rest = rest.slice(cut).replace(/^\s+/, '');
  }
  if (rest) out.push(rest);
  return out;
}

/** The largest cut ≤ limit that does not fall inside an entity or a `<...>` link. */
function safeHardCut(text: string, limit: number): number {
  const head = text.slice(0, limit);
  const amp = head.lastIndexOf('&');
  if (amp > 0 && !head.slice(amp).includes(';') && limit - amp < 8) return amp;
  const lt = head.lastIndexOf('<');
  if (lt > 0 && !head.slice(lt).includes('>')) return lt;
  return limit;
}

/** Splits a code block by lines; every piece is a complete ``` block. */
function splitCode(block: string, limit: number): string[] {
  const body = block.replace(/^```\n/, '').replace(/\n```$/, '');
  const budget = limit - 8; // "```\n" + "\n```"
  const lines = body.split('\n').flatMap((line) => (line.length <= budget ? [line] : hardSplit(line, budget)));
  const out: string[] = [];
  let current: string[] = [];
  let size = 0;
  for (const line of lines) {
    if (current.length && size + 1 + line.length > budget) {
      out.push(`\`\`\`\n${current.join('\n')}\n\`\`\``);
      current = [];
      size = 0;
    }
    size += (current.length ? 1 : 0) + line.length;
    current.push(line);
  }
  if (current.length) out.push(`\`\`\`\n${current.join('\n')}\n\`\`\``);
  return out;
}

function hardSplit(line: string, size: number): string[] {
  const out: string[] = [];
  let rest = line;
  while (rest.length > size) {
    const cut = safeHardCut(rest, size);
    out.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  if (rest) out.push(rest);
  return out;
}
