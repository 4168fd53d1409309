import { describe, expect, it } from 'vitest';
import { escapeHtml, markdownToTelegramHtml, renderOutbound } from '../../../channels/telegram/render.ts';
import { htmlToPlainText, htmlToReadableText, splitHtml } from '../../../channels/telegram/split-html.ts';
import { telegramCommands } from '../../../channels/telegram/deliver.ts';
import { parseTelegramHtml } from '../../fakes/fake-telegram.ts';

/** The visible text of a chunk; fails the test when Telegram would reject the HTML. */
function visible(html: string): string {
  const parsed = parseTelegramHtml(html);
  if ('error' in parsed) throw new Error(`${parsed.error}\n${html}`);
  return parsed.text;
}

describe('markdownToTelegramHtml', () => {
  it('escapes <, > and & everywhere, including code', () => {
    expect(markdownToTelegramHtml('a < b && c > d <script>')).toBe('a &lt; b &amp;&amp; c &gt; d &lt;script&gt;');
    expect(markdownToTelegramHtml('`x<y && z`')).toBe('<code>x&lt;y &amp;&amp; z</code>');
    expect(markdownToTelegramHtml('```\nif (a<b) {}\n```')).toBe('<pre><code>if (a&lt;b) {}</code></pre>');
    expect(escapeHtml('&lt;')).toBe('&amp;lt;');
  });

  it('renders emphasis, links, code blocks with their language, quotes', () => {
    expect(markdownToTelegramHtml('**bold** _it_ ~~gone~~ [site](https://example.com/?a=1&b="2")'))
      .toBe('<b>bold</b> <i>it</i> <s>gone</s> <a href="https://example.com/?a=1&amp;b=%222%22">site</a>');
    expect(markdownToTelegramHtml('```ts\nconst a = 1;\n```')).toBe('<pre><code class="language-ts">const a = 1;</code></pre>');
    expect(markdownToTelegramHtml('> quoted\n> more')).toBe('<blockquote>quoted\nmore</blockquote>');
  });

  it('turns headings, lists and tables into what Telegram can show', () => {
    expect(markdownToTelegramHtml('# Title\n\ntext')).toBe('<b>Title</b>\n\ntext');
    expect(markdownToTelegramHtml('- one\n- two\n  1. sub\n\nafter')).toBe('• one\n• two\n   1. sub\n\nafter');
    expect(markdownToTelegramHtml('3. c\n4. d')).toBe('3. c\n4. d');
    expect(markdownToTelegramHtml('| a | bb |\n|---|---|\n| 1 | 2 |')).toBe('<pre>a | bb\n--|---\n1 | 2</pre>');
  });

  it('drops links Telegram would refuse (relative, javascript:) but keeps their text', () => {
    expect(markdownToTelegramHtml('[rel](/path) [js](javascript:alert(1))')).toBe('rel [js](javascript:alert(1))');
  });

  it('always yields HTML that Telegram parses, for awkward input', () => {
    for (const input of ['**unclosed', '<b>raw html</b>', '5 > 3 & 2 < 4', '```\nunterminated', '*a **b** c*', '[x](https://e.com/<>)', '&amp; &copy; &#169;']) {
      expect(() => visible(markdownToTelegramHtml(input))).not.toThrow();
    }
    expect(visible(markdownToTelegramHtml('<b>raw html</b>'))).toBe('<b>raw html</b>');
  });
});

describe('markdownToTelegramHtml: blocks, links and tables', () => {
  it('a rule, indented code, the first word of a fence info string as language (cleaned), no language without one', () => {
    expect(markdownToTelegramHtml('intro\n\n---\n\nafter')).toBe('intro\n\n──────────\n\nafter');
    expect(markdownToTelegramHtml('    code < 1\n\nafter')).toBe('<pre><code>code &lt; 1</code></pre>\n\nafter');
    expect(markdownToTelegramHtml('```  python extra\nx\n```')).toBe('<pre><code class="language-python">x</code></pre>');
    expect(markdownToTelegramHtml('```py"th<o>n\nx\n```')).toBe('<pre><code class="language-python">x</code></pre>');
  });

  it('a table followed by text ends where the table ends; columns are aligned by characters, emoji counted once', () => {
    expect(markdownToTelegramHtml('| a | b |\n|---|---|\n| 1 | 2 |\n\nafter')).toBe('<pre>a | b\n--|--\n1 | 2</pre>\n\nafter');
    expect(markdownToTelegramHtml('| 👍 | b |\n|---|---|\n| long | 2 |')).toBe('<pre>👍    | b\n-----|--\nlong | 2</pre>');
    expect(markdownToTelegramHtml('| solo |\n|---|')).toBe('<pre>solo</pre>');
    expect(markdownToTelegramHtml('| a |\n|---|\n| 1 |\n\ntext\n\n| bb | c |\n|---|---|\n| 2 | 3 |')).toBe('<pre>a\n-\n1</pre>\n\ntext\n\n<pre>bb | c\n---|--\n2  | 3</pre>');
  });

  it('lists: a loose list is written tight, a list after a paragraph or a blank line, a list inside a quote', () => {
    expect(markdownToTelegramHtml('- a\n\n- b')).toBe('• a\n• b');
    expect(markdownToTelegramHtml('intro\n\n- a\n- b')).toBe('intro\n\n• a\n• b');
    expect(markdownToTelegramHtml('# H\n- a')).toBe('<b>H</b>\n\n• a');
    expect(markdownToTelegramHtml('> - a\n> - b')).toBe('<blockquote>• a\n• b</blockquote>');
    expect(markdownToTelegramHtml('- a\n  - b\n- c')).toBe('• a\n   • b\n• c');
    expect(markdownToTelegramHtml('- a\n\n  > quote\n- b')).toBe('• a\n<blockquote>quote</blockquote>\n• b');
  });

  it('a quote after a paragraph is its own block', () => {
    expect(markdownToTelegramHtml('intro\n\n> quoted')).toBe('intro\n\n<blockquote>quoted</blockquote>');
  });

  it('hard breaks, images as their alt text, escaped markdown characters and entities as text', () => {
    expect(markdownToTelegramHtml('x  \ny')).toBe('x\ny');
    expect(markdownToTelegramHtml('![alt text](https://i.com/x.png) end')).toBe('alt text end');
    expect(markdownToTelegramHtml('\\*not bold\\* &lt;b&gt;')).toBe('*not bold* &lt;b&gt;');
  });

  it('http and tg: links are links; a scheme further on in a relative URL is not', () => {
    expect(markdownToTelegramHtml('[x](http://e.com) [y](tg://user?id=1) [z](foo/https:x)')).toBe('<a href="http://e.com">x</a> <a href="tg://user?id=1">y</a> z');
  });

  it('a URL longer than maxUrl: a labelled link becomes label (URL), a bare or autolinked URL is written once, as text', () => {
    const p = 'p'.repeat(20);
    expect(markdownToTelegramHtml(`[label](https://e.com/${p}) and https://e.com/${p} and <https://e.com/${p}>`, 30))
      .toBe(`label (https://e.com/${p}) and https://e.com/${p} and https://e.com/${p}`);
    expect(markdownToTelegramHtml('https://e.com/short')).toBe('<a href="https://e.com/short">https://e.com/short</a>');
  });

  it('renderOutbound: half the message limit is the longest URL kept as a link (34 characters fit in 68, not in 66)', () => {
    const md = `[label](https://e.com/${'p'.repeat(20)})`;
    expect(renderOutbound({ text: md }, 66)).toEqual([`label (https://e.com/${'p'.repeat(20)})`]);
    expect(renderOutbound({ text: md }, 68)).toEqual([`<a href="https://e.com/${'p'.repeat(20)}">label</a>`]);
  });
});

describe('splitHtml / renderOutbound', () => {
  it('leaves a short message whole and puts the notice first', () => {
    expect(renderOutbound({ text: 'the answer', notice: 'New session started.' })).toEqual(['New session started.\n\nthe answer']);
  });

  it('splits long prose at paragraph boundaries, then words, never inside a word', () => {
    const paragraph = (n: number) => Array.from({ length: 60 }, (_, i) => `word${n}_${i}`).join(' ');
    const text = Array.from({ length: 20 }, (_, n) => paragraph(n)).join('\n\n');
    const chunks = renderOutbound({ text }, 1000);
    expect(chunks.length).toBeGreaterThan(1);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(1000);
    const words = chunks.flatMap((c) => visible(c).split(/\s+/));
    expect(words).toEqual(text.split(/\s+/));
    // Paragraphs that fit are never cut in the middle.
    for (const c of chunks) expect(c.startsWith('word') && /_0$/.test(c.split(' ')[0]!)).toBe(true);
  });

  it('cuts a single word longer than a message only because it must', () => {
    const long = 'x'.repeat(2500);
    const chunks = splitHtml(`start ${long} end`, 1000);
    // The word is cut only where a message is full: the first message is filled, not ended after "start".
    expect(chunks).toEqual([`start ${'x'.repeat(994)}`, 'x'.repeat(1000), `${'x'.repeat(506)} end`]);
  });

  it('closes and reopens a code block across messages, at line ends', () => {
    const code = Array.from({ length: 120 }, (_, i) => `let v${i} = a < b && c;`).join('\n');
    const chunks = renderOutbound({ text: `\`\`\`ts\n${code}\n\`\`\`` }, 1000);
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    for (const c of chunks) {
      expect(visible(c).length).toBeLessThanOrEqual(1000);
      expect(c.startsWith('<pre><code class="language-ts">')).toBe(true);
      expect(c.endsWith('</code></pre>')).toBe(true);
    }
    expect(chunks.map(visible).join('\n')).toBe(code);
  });

  it('moves a code block that fits in one message to the next one instead of cutting it', () => {
    const intro = 'intro '.repeat(100).trim();
    const code = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n');
    const chunks = renderOutbound({ text: `${intro}\n\n\`\`\`\n${code}\n\`\`\`` }, 700);
    expect(chunks).toHaveLength(2);
    expect(chunks[0]).toBe(intro);
    expect(chunks[1]).toBe(`<pre><code>${code}</code></pre>`);
  });

  it('keeps inline formatting balanced across a cut and never splits an entity or an emoji', () => {
    const text = `**${'bold &amp; 😀 '.repeat(200).trim()}**`;
    const chunks = renderOutbound({ text }, 500);
    expect(chunks.length).toBeGreaterThan(3);
    for (const c of chunks) {
      expect(visible(c).length).toBeLessThanOrEqual(500);
      expect(c.startsWith('<b>') && c.endsWith('</b>')).toBe(true);
      expect(() => visible(c)).not.toThrow();
      expect(c).not.toMatch(/\uD83D$|^\uDE00/);
    }
  });

  it('never cuts a link, inline code or bold that fits in one message: it moves to the next one', () => {
    const spans: [string, string][] = [
      ['[the docs](https://example.com/docs)', '<a href="https://example.com/docs">the docs</a>'],
      ['`npm run build --verbose`', '<code>npm run build --verbose</code>'],
      ['**the really important part**', '<b>the really important part</b>'],
    ];
    for (const [markdown, html] of spans) {
      const filler = 'x'.repeat(4096 - Math.floor(htmlToPlainText(html).length / 2)); // the span's text straddles unit 4096
      const chunks = renderOutbound({ text: `${filler} ${markdown} and more` });
      expect(chunks).toEqual([filler, `${html} and more`]);
    }
  });

  it('htmlToPlainText is what the user would see', () => {
    expect(htmlToPlainText('<b>a &lt; b</b> &amp; <a href="x">c</a> &#169; &quot;q&quot;')).toBe('a < b & c © "q"');
  });
});

describe('telegramCommands', () => {
  it('keeps only names Telegram accepts, lowercase, once, with a description', () => {
    expect(telegramCommands([
      { command: '/new', description: 'start a new session' }, { command: 'Status', description: 'show status' },
      { command: 'new', description: 'dupe' }, { command: 'bad-name', description: 'x' }, { command: 'help', description: ' ' },
    ])).toEqual([{ command: 'new', description: 'start a new session' }, { command: 'status', description: 'show status' }, { command: 'help', description: 'help' }]);
  });
});

describe('Telegram links without text, and as plain text', () => {
  it('a link with an empty label shows its URL', () => {
    expect(markdownToTelegramHtml('see [](https://x.io/a?b=1&c=2) now')).toBe('see <a href="https://x.io/a?b=1&amp;c=2">https://x.io/a?b=1&amp;c=2</a> now');
    expect(markdownToTelegramHtml(`[](https://x.io/${'a'.repeat(30)})`, 20)).toBe(`https://x.io/${'a'.repeat(30)}`);
  });

  it('readable text of the HTML keeps each link as its text and URL, once when the text is the URL', () => {
    expect(htmlToReadableText('<b>Read</b> <a href="https://x.io/?a=1&amp;b=&quot;2&quot;">the &lt;docs&gt;</a> or <a href="https://y.io">https://y.io</a>'))
      .toBe('Read the <docs> (https://x.io/?a=1&b="2") or https://y.io');
  });
});

