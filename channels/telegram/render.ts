import MarkdownIt from 'markdown-it';
import type { Token } from 'markdown-it';
import { outboundText, type OutboundMessage } from '../../src/core/message.ts';
import { splitHtml, TELEGRAM_TEXT_LIMIT } from './split-html.ts';

const markdown = new MarkdownIt({ html: false, linkify: true, breaks: false });

/** Escapes text for Telegram HTML: `&`, `<` and `>` (and `"` inside attributes). */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function escapeAttribute(text: string): string {
  return escapeHtml(text).replace(/"/g, '&quot;');
}

/**
 * Renders an outbound message (markdown, notice first) to Telegram HTML messages of at most `limit`
 * (4096) UTF-16 units of text each, as Telegram counts them. Pure.
 */
export function renderOutbound(message: OutboundMessage, limit = TELEGRAM_TEXT_LIMIT): string[] {
  return splitHtml(markdownToTelegramHtml(outboundText(message), Math.floor(limit / 2)), limit);
}

/**
 * Markdown → the HTML subset Telegram accepts (`b i s u a code pre blockquote`). Headings become bold
 * lines, lists become bullet or numbered lines, tables become a preformatted block; every other
 * character is escaped. A link whose URL is longer than `maxUrl` (half a message by default) becomes its
 * text followed by the URL in parentheses, as plain text. Pure.
 */
export function markdownToTelegramHtml(source: string, maxUrl = TELEGRAM_TEXT_LIMIT / 2): string {
  const writer = new BlockWriter();
  const tokens = markdown.parse(source, {});
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    switch (token.type) {
      case 'paragraph_open':
        if (!token.hidden) writer.block();
        break;
      case 'heading_open':
        writer.block();
        writer.write('<b>');
        break;
      case 'heading_close':
        writer.write('</b>');
        break;
      case 'inline':
        writer.write(renderInline(token.children ?? [], maxUrl));
        break;
      case 'bullet_list_open':
      case 'ordered_list_open':
        writer.openList(token.type === 'ordered_list_open', Number(token.attrGet('start') ?? 1));
        break;
      case 'bullet_list_close':
      case 'ordered_list_close':
        writer.closeList();
        break;
      case 'list_item_open':
        writer.listItem();
        break;
      case 'blockquote_open':
        writer.block();
        writer.write('<blockquote>');
        break;
      case 'blockquote_close':
        writer.trimEnd();
        writer.write('</blockquote>');
        break;
      case 'fence':
      case 'code_block': {
        writer.block();
        const language = token.info.trim().split(/\s+/)[0]?.replace(/[^\w+#.-]/g, '');
        const code = escapeHtml(token.content.replace(/\n$/, ''));
        writer.write(language ? `<pre><code class="language-${language}">${code}</code></pre>` : `<pre><code>${code}</code></pre>`);
        break;
      }
      case 'hr':
        writer.block();
        writer.write('──────────');
        break;
      case 'table_open': {
        const end = tokens.findIndex((t, j) => j > i && t.type === 'table_close');
        writer.block();
        writer.write(renderTable(tokens.slice(i, end < 0 ? tokens.length : end)));
        if (end > i) i = end;
        break;
      }
      default:
        break;
    }
  }
  return writer.toString();
}

/** Keeps track of blank lines between blocks and of list nesting. */
class BlockWriter {
  private out = '';
  private readonly lists: { ordered: boolean; next: number }[] = [];
  private itemJustOpened = false;

  write(html: string): void {
    this.out += html;
    if (html) this.itemJustOpened = false;
  }

  /** Starts a block: a blank line after earlier content (a single newline inside lists). */
  block(): void {
    if (this.itemJustOpened) return;
    if (!this.out || this.out.endsWith('<blockquote>')) return;
    this.trimEnd();
    this.out += this.lists.length ? '\n' : '\n\n';
  }

  openList(ordered: boolean, start: number): void {
    if (this.lists.length === 0) this.block();
    this.lists.push({ ordered, next: Number.isFinite(start) ? start : 1 });
  }

  closeList(): void {
    this.lists.pop();
  }

  listItem(): void {
    const list = this.lists.at(-1);
    if (!list) return;
    if (this.out && !this.out.endsWith('\n') && !this.out.endsWith('<blockquote>')) {
      this.trimEnd();
      this.out += '\n';
    }
    const marker = list.ordered ? `${list.next++}.` : '•';
    this.out += `${'   '.repeat(this.lists.length - 1)}${marker} `;
    this.itemJustOpened = true;
  }

  trimEnd(): void {
    this.out = this.out.replace(/\s+$/, '');
  }

  toString(): string {
    return this.out.trim();
  }
}

function renderInline(tokens: readonly Token[], maxUrl: number): string {
  let out = '';
  /** Per open link: the markup that ends it, where its text starts, and the URL to show when it has no text. */
  const links: { end: string; start: number; href: string }[] = [];
  for (const token of tokens) {
    switch (token.type) {
      case 'text':
        out += escapeHtml(token.content);
        break;
      case 'code_inline':
        out += `<code>${escapeHtml(token.content)}</code>`;
        break;
      case 'softbreak':
      case 'hardbreak':
        out += '\n';
        break;
      case 'strong_open': out += '<b>'; break;
      case 'strong_close': out += '</b>'; break;
      case 'em_open': out += '<i>'; break;
      case 'em_close': out += '</i>'; break;
      case 's_open': out += '<s>'; break;
      case 's_close': out += '</s>'; break;
      case 'link_open': {
        const href = String(token.attrGet('href') ?? '');
        const usable = /^(https?|tg):/i.test(href);
        // A URL this long would leave little room for text in every message the link is split across.
        const long = usable && href.length > maxUrl;
        const bare = token.markup === 'linkify' || token.markup === 'autolink';
        if (usable && !long) out += `<a href="${escapeAttribute(href)}">`;
        links.push({ end: !usable ? '' : long ? (bare ? '' : ` (${escapeHtml(href)})`) : '</a>', start: out.length, href });
        break;
      }
      case 'link_close': {
        const link = links.pop();
        if (!link) break;
        // `[](https://x)`: an empty link would be dropped, and its URL with it.
        if (!out.slice(link.start).trim()) {
          out += escapeHtml(link.href);
          if (link.end !== '</a>') break; // the URL is the text already
        }
        out += link.end;
        break;
      }
      case 'image':
        out += escapeHtml(token.content || String(token.attrGet('alt') ?? ''));
        break;
      default:
        out += escapeHtml(token.content);
    }
  }
  return out;
}

/** A markdown table as an aligned preformatted block (Telegram has no tables). */
function renderTable(tokens: readonly Token[]): string {
  const rows: string[][] = [];
  let row: string[] | undefined;
  for (const token of tokens) {
    if (token.type === 'tr_open') row = [];
    else if (token.type === 'tr_close' && row) rows.push(row);
    else if (token.type === 'inline' && row) row.push(plainInline(token.children ?? []));
  }
  const widths = rows.reduce<number[]>((w, r) => r.map((cell, i) => Math.max(w[i] ?? 0, [...cell].length)), []);
  const lines = rows.map((r) => r.map((cell, i) => cell.padEnd((widths[i] ?? 0) + cell.length - [...cell].length)).join(' | ').trimEnd());
  if (lines.length > 1) lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('-|-'));
  return `<pre>${escapeHtml(lines.join('\n'))}</pre>`;
}

function plainInline(tokens: readonly Token[]): string {
  return tokens.map((t) => (t.type === 'softbreak' || t.type === 'hardbreak' ? ' ' : t.content)).join('');
}
