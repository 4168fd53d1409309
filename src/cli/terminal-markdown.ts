/** ANSI styles (SGR) with their own reset codes, so nested styles end cleanly. */
const STYLE = {
  bold: ['\x1b[1m', '\x1b[22m'],
  dim: ['\x1b[2m', '\x1b[22m'],
  italic: ['\x1b[3m', '\x1b[23m'],
  underline: ['\x1b[4m', '\x1b[24m'],
  strike: ['\x1b[9m', '\x1b[29m'],
  cyan: ['\x1b[36m', '\x1b[39m'],
} as const;

const paint = (style: keyof typeof STYLE, text: string) => `${STYLE[style][0]}${text}${STYLE[style][1]}`;

/** Inline markdown (code spans, bold, italic, strike, links) as ANSI styles. */
export function renderInline(text: string): string {
  // Code spans first: nothing inside them is markdown.
  return text.split(/(`[^`\n]+`)/).map((part) => {
    if (/^`[^`\n]+`$/.test(part)) return paint('cyan', part.slice(1, -1));
    return part
      .replace(/\[([^\]\n]+)\]\((\S+?)\)/g, (_m, label: string, url: string) => `${paint('underline', label)}${paint('dim', ` (${url})`)}`)
      .replace(/(\*\*|__)(?=\S)([^\n]*?\S)\1/g, (_m, _d, inner: string) => paint('bold', inner))
      .replace(/(^|[^\w*])\*(?=\S)([^*\n]*?\S)\*(?!\*)/g, (_m, pre: string, inner: string) => `${pre}${paint('italic', inner)}`)
      .replace(/(^|[^\w])_(?=\S)([^_\n]*?\S)_(?!\w)/g, (_m, pre: string, inner: string) => `${pre}${paint('italic', inner)}`)
      .replace(/~~(?=\S)([^~\n]*?\S)~~/g, (_m, inner: string) => paint('strike', inner));
  }).join('');
}

/**
 * Renders markdown for a terminal as it streams in: complete lines get their block style (headings,
 * quotes, list bullets, rules, fenced code) and inline styles; a long line is written in pieces at word
 * boundaries where no inline style is open, so a paragraph appears while it is being written. With
 * `color: false` (output is not a terminal) the text passes through unchanged.
 */
export class TerminalMarkdown {
  private buffer = '';
  private inFence = false;
  /** Part of the current line was already written (its block prefix included). */
  private midLine = false;
  private readonly write: (text: string) => void;
  private readonly color: boolean;

  constructor(write: (text: string) => void, options: { color: boolean }) {
    this.write = write;
    this.color = options.color;
  }

  push(delta: string): void {
    if (!this.color) {
      this.write(delta);
      return;
    }
    this.buffer += delta;
    let newline: number;
    while ((newline = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      this.write(`${this.renderPiece(line)}\n`);
      this.midLine = false;
    }
    this.flushSafePrefix();
  }

  /** Writes what is left and resets for the next reply. */
  end(): void {
    if (this.color && this.buffer) this.write(this.renderPiece(this.buffer));
    this.buffer = '';
    this.midLine = false;
    this.inFence = false;
  }

  /** Renders a whole text at once. */
  render(text: string): void {
    this.push(text);
    this.end();
  }

  private flushSafePrefix(): void {
    if (this.inFence || this.buffer.length < 40) return;
    if (!this.midLine && /^\s*(```|~~~)/.test(this.buffer)) return;
    const cut = this.buffer.lastIndexOf(' ');
    if (cut <= 0) return;
    const head = this.buffer.slice(0, cut + 1);
    if (!balanced(head)) return;
    this.buffer = this.buffer.slice(cut + 1);
    this.write(this.renderPiece(head));
    this.midLine = true;
  }

  private renderPiece(text: string): string {
    if (this.midLine) return this.inFence ? paint('cyan', text) : renderInline(text);
    const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(text);
    if (fence) {
      this.inFence = !this.inFence;
      return this.inFence && fence[2] ? paint('dim', `── ${fence[2]} ──`) : paint('dim', '──');
    }
    if (this.inFence) return paint('cyan', `  ${text}`);
    const heading = /^(#{1,6})\s+(.*)$/.exec(text);
    if (heading) return heading[1]!.length === 1 ? paint('bold', paint('underline', renderInline(heading[2]!))) : paint('bold', renderInline(heading[2]!));
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(text)) return paint('dim', '─'.repeat(40));
    const quote = /^\s*>\s?(.*)$/.exec(text);
    if (quote) return `${paint('dim', '│ ')}${paint('italic', renderInline(quote[1]!))}`;
    const bullet = /^(\s*)[-*+]\s+(.*)$/.exec(text);
    if (bullet) return `${bullet[1]}  • ${renderInline(bullet[2]!)}`;
    const ordered = /^(\s*)(\d+[.)])\s+(.*)$/.exec(text);
    if (ordered) return `${ordered[1]}  ${ordered[2]} ${renderInline(ordered[3]!)}`;
    return renderInline(text);
  }
}

/** True when a piece of a line opens no code span, bold, italic or link it does not close. */
function balanced(text: string): boolean {
  const count = (re: RegExp) => (text.match(re) ?? []).length;
  return count(/`/g) % 2 === 0 && count(/\*\*/g) % 2 === 0 && count(/~~/g) % 2 === 0
    && count(/(?<!\*)\*(?!\*)/g) % 2 === 0 && count(/\[/g) === count(/\]\(/g) && count(/\]\(/g) === count(/\)/g);
}
