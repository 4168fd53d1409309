import { describe, expect, it } from 'vitest';
import { escapeMrkdwn, renderMrkdwn, renderSlackChunks, SLACK_TEXT_LIMIT } from '../../../channels/slack/render.ts';

describe('Slack mrkdwn rendering', () => {
  it('renders bold, italics, strike, inline code and links', () => {
    expect(renderMrkdwn('**bold**, *italic*, _also_, ~~gone~~, `code` and [the docs](https://example.com/a?b=1&c=2)'))
      .toBe('*bold*, _italic_, _also_, ~gone~, `code` and <https://example.com/a?b=1&amp;c=2|the docs>');
  });

  it('writes a bare link once, and keeps only the label of a relative link', () => {
    expect(renderMrkdwn('<https://example.com> and [x](https://example.com/x|y)')).toBe('<https://example.com> and <https://example.com/x%7Cy|x>');
    expect(renderMrkdwn('[local](./file.md)')).toBe('local');
  });

  it('escapes &, < and > in text and code, but not in the link syntax it emits', () => {
    expect(renderMrkdwn('a < b && c > d <!channel> [x & y](https://e.com)')).toBe('a &lt; b &amp;&amp; c &gt; d &lt;!channel&gt; <https://e.com|x &amp; y>');
    expect(renderMrkdwn('`if a < b`')).toBe('`if a &lt; b`');
    expect(escapeMrkdwn('<@U1> & co')).toBe('&lt;@U1&gt; &amp; co');
  });

  it('renders headings as bold lines, lists, quotes, rules and code blocks without a language', () => {
    const md = '# Plan **now**\n\nIntro\n\n- one\n- two\n  1. inner\n\n3. three\n4. four\n\n> quoted\n> text\n\n---\n\n```ts\nconst x = a < b;\n```';
    expect(renderMrkdwn(md)).toBe([
      '*Plan now*',
      'Intro',
      '• one\n• two\n    1. inner',
      '3. three\n4. four',
      '> quoted\n> text',
      '──────────',
      '```\nconst x = a &lt; b;\n```',
    ].join('\n\n'));
  });

  it('turns a table into an aligned code block', () => {
    expect(renderMrkdwn('| name | n |\n|---|---|\n| alpha | 1 |\n| b | 22 |')).toBe('```\nname  | n\n------+---\nalpha | 1\nb     | 22\n```');
  });

  it('keeps single line breaks', () => {
    expect(renderMrkdwn('line one\nline two')).toBe('line one\nline two');
    expect(renderMrkdwn('hard  \nbreak')).toBe('hard\nbreak');
  });

  it("passes Slack's own link and channel syntax through; mentions and broadcasts stay escaped (the model must not ping anyone)", () => {
    expect(renderMrkdwn('see <https://x.com/a|the docs> then <#C123|gen & co> and <#G9> and <@U1> <!here> end'))
      .toBe('see <https://x.com/a|the docs> then <#C123|gen &amp; co> and <#G9> and &lt;@U1&gt; &lt;!here&gt; end');
    // Without a space CommonMark reads them as autolinks; they are still Slack links with their labels.
    expect(renderMrkdwn('<https://x.com/a|docs> and <http://y.org/b|site> and <mailto:a@b.c|Me>'))
      .toBe('<https://x.com/a|docs> and <http://y.org/b|site> and <mailto:a@b.c|Me>');
  });

  it('a link labelled with its own address (or nothing) is written bare; http and mailto are links too', () => {
    expect(renderMrkdwn('[a@b.c](mailto:a@b.c) [https://e.com](https://e.com) [](https://e.com) [x](http://e.com/p)'))
      .toBe('<mailto:a@b.c> <https://e.com> <https://e.com> <http://e.com/p|x>');
  });

  it('a link with another scheme, or a relative one, leaves its label (or, without one, the address) as text', () => {
    expect(renderMrkdwn('[x](ftp://host/http:y) and [](./rel)')).toBe('x and ./rel');
  });

  it('link labels are plain text: line breaks become spaces, an image gives its alt text', () => {
    expect(renderMrkdwn('[a\nb](https://e.com) [![alt](https://i.com/i.png)](https://e.com/2)')).toBe('<https://e.com|a b> <https://e.com/2|alt>');
    expect(renderMrkdwn('[a  \nb](https://e.com)')).toBe('<https://e.com|a b>');
    expect(renderMrkdwn('[mailto:a@b.c](mailto:a@b.c)')).toBe('<mailto:a@b.c>');
  });

  it('images become links to the image, labelled with the alt text', () => {
    expect(renderMrkdwn('![cat](https://i.com/c.png) and ![](https://i.com/d.png)')).toBe('<https://i.com/c.png|cat> and <https://i.com/d.png>');
  });

  it('a URL longer than half a message is written out as text after its label (the limit is inclusive)', () => {
    // limit 60: URLs of up to 30 characters stay links.
    expect(renderMrkdwn(`[label](https://e.com/${'p'.repeat(16)})`, 60)).toBe(`<https://e.com/${'p'.repeat(16)}|label>`);
    expect(renderMrkdwn(`[label](https://e.com/${'p'.repeat(17)})`, 60)).toBe(`label (https://e.com/${'p'.repeat(17)})`);
    expect(renderMrkdwn(`<https://e.com/${'p'.repeat(17)}>`, 60)).toBe(`https://e.com/${'p'.repeat(17)}`);
  });

  it('escapes & < > also when a combining mark is attached to them', () => {
    expect(renderMrkdwn('a &\u0301 b <\u0301')).toBe('a &amp;\u0301 b &lt;\u0301');
  });

  it('a reply that starts with a list keeps every item', () => {
    expect(renderMrkdwn('- a\n- b\n- c')).toBe('• a\n• b\n• c');
    expect(renderMrkdwn('1. a\n2. b\n3. c')).toBe('1. a\n2. b\n3. c');
  });

  it('a quote of two paragraphs keeps the blank line between them, quoted', () => {
    expect(renderMrkdwn('> one\n>\n> two')).toBe('> one\n> \n> two');
  });

  it('indented code is a code block; trailing blank lines of a block are dropped', () => {
    expect(renderMrkdwn('    indented < code\n\nafter')).toBe('```\nindented &lt; code\n```\n\nafter');
    expect(renderMrkdwn('```\ncode\n\n\n```')).toBe('```\ncode\n```');
  });

  it('blocks with nothing to show (an empty heading, an empty or blank code block) are left out', () => {
    expect(renderMrkdwn('#\n\nafter')).toBe('after');
    expect(renderMrkdwn('```\n```')).toBe('');
    expect(renderMrkdwn('```\n   \n```\n\nafter')).toBe('after');
    expect(renderSlackChunks('```\n```')).toEqual([]);
  });
});

describe('Slack message splitting (4000 characters)', () => {
  it('sends a short reply as one message and an empty one as none', () => {
    expect(renderSlackChunks('hello')).toEqual(['hello']);
    expect(renderSlackChunks('  \n ')).toEqual([]);
  });

  it('splits long prose between words', () => {
    const words = Array.from({ length: 1500 }, (_, i) => `w${i}`).join(' ');
    const chunks = renderSlackChunks(words);
    expect(chunks.length).toBeGreaterThan(1);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(SLACK_TEXT_LIMIT);
    expect(chunks.join(' ')).toBe(words);
  });

  it('packs paragraphs together and breaks between them', () => {
    const para = 'x'.repeat(1500);
    expect(renderSlackChunks([para, para, para].join('\n\n'))).toEqual([`${para}\n\n${para}`, para]);
  });

  it('keeps a code block whole when it fits, moving it to the next message', () => {
    const code = `\`\`\`\n${'let a = 1;\n'.repeat(200)}\`\`\``;
    const chunks = renderSlackChunks(`${'intro '.repeat(400)}\n\n${code}`);
    expect(chunks).toHaveLength(2);
    expect(chunks[1]!.startsWith('```\n') && chunks[1]!.endsWith('\n```')).toBe(true);
  });

  it('splits an oversized code block between lines, each piece fenced', () => {
    const lines = Array.from({ length: 700 }, (_, i) => `line ${i} ${'.'.repeat(5)}`);
    const chunks = renderSlackChunks(`\`\`\`\n${lines.join('\n')}\n\`\`\``);
    expect(chunks.length).toBeGreaterThan(1);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(SLACK_TEXT_LIMIT);
      expect(c.startsWith('```\n') && c.endsWith('\n```')).toBe(true);
    }
    expect(chunks.map((c) => c.slice(4, -4)).join('\n')).toBe(lines.join('\n'));
  });

  it('never cuts an escape or a link in a word longer than the limit', () => {
    const chunks = renderSlackChunks(`${'a'.repeat(3998)}&[x](https://e.com)${'b'.repeat(10)}`);
    expect(chunks[0]).toBe('a'.repeat(3998));
    expect(chunks[1]!.startsWith('&amp;<https://e.com|x>')).toBe(true);
  });

  it('a code block in a quote is quoted on every line, the fences too', () => {
    expect(renderMrkdwn('> Run:\n> ```sh\n> npm ci\n> npm test\n> ```')).toBe('> Run:\n> \n> ```\n> npm ci\n> npm test\n> ```');
  });

  it('a code block in a list item is indented on every line, the fences too', () => {
    expect(renderMrkdwn('1. Build\n\n   ```\n   make\n   make install\n   ```\n2. Done')).toBe('1. Build\n    ```\n    make\n    make install\n    ```\n2. Done');
  });

  it('a quoted code block cut in two is closed and reopened inside the quote', () => {
    const code = Array.from({ length: 8 }, (_, i) => `> line ${i}`).join('\n');
    expect(renderSlackChunks(`> \`\`\`\n${code}\n> \`\`\``, 60)).toEqual([
      '> ```\n> line 0\n> line 1\n> line 2\n> line 3\n> line 4\n> ```',
      '> ```\n> line 5\n> line 6\n> line 7\n> ```',
    ]);
  });

  it('a quoted line longer than a message keeps its quote marker after the cut', () => {
    expect(renderSlackChunks(`> ${'word '.repeat(14)}end`, 40)).toEqual([
      '> word word word word word word word',
      '> word word word word word word word end',
    ]);
  });

  it('a cut at a blank line inside a quote leaves no empty quote line at either edge', () => {
    expect(renderSlackChunks(`> ${'a'.repeat(30)}\n>\n> ${'b'.repeat(30)}`, 40)).toEqual([`> ${'a'.repeat(30)}`, `> ${'b'.repeat(30)}`]);
  });

  it('Slack links keep their URL as written (no percent-decoding) and their label, emphasis or code included', () => {
    expect(renderMrkdwn('<https://x.io/a%20b|docs> <https://x.io/a%7Cb|docs> <https://x.io|*bold* docs> <https://x.io|`code`>'))
      .toBe('<https://x.io/a%20b|docs> <https://x.io/a%7Cb|docs> <https://x.io|*bold* docs> <https://x.io|`code`>');
  });

  it('Slack syntax in code stays code; a mention with a label stays neutralized', () => {
    expect(renderMrkdwn('`<https://x.io|a>` and <@U123|bob_the_builder_>\n\n```\n<https://x.io|b>\n```'))
      .toBe('`&lt;https://x.io|a&gt;` and &lt;@U123|bob_the_builder_&gt;\n\n```\n&lt;https://x.io|b&gt;\n```');
  });

  it('a channel reference with an overlong id or name is text, which a split may cut', () => {
    const name = 'n'.repeat(150);
    expect(renderMrkdwn(`<#C12345678901234567890123|x> <#C1|${name}>`)).toBe(`&lt;#C12345678901234567890123|x&gt; &lt;#C1|${name}&gt;`);
    for (const chunk of renderSlackChunks(`<#C1|${'n'.repeat(5000)}>`)) expect(chunk.length).toBeLessThanOrEqual(4000);
  });

  it('table columns are aligned by characters: an emoji or CJK cell is one column per character', () => {
    expect(renderMrkdwn('| a | b |\n|---|---|\n| 👍👍 | x |\n| 漢 | y |')).toBe('```\na  | b\n---+--\n👍👍 | x\n漢  | y\n```');
  });
});

describe('Slack syntax next to markdown: labels, cells, and code blocks that end', () => {
  it.each([
    ['in a link label or image alt text it shows as its label', '[see <https://x.io|docs>](https://z.io) and ![<#C1|gen>](https://i.io/p.png)',
      '<https://z.io|see docs> and <https://i.io/p.png|#gen>'],
    ['in a table cell it shows as its label, a channel as #name or #id, a mention escaped',
      '| a | b | c | d | e |\n|---|---|---|---|---|\n| <https://x.io|docs> | <#C1|general> | <#C2> | <mailto:a@b.c> | <@U1> |',
      '```\na    | b        | c   | d     | e\n-----+----------+-----+-------+------\ndocs | #general | #C2 | a@b.c | &lt;@U1&gt;\n```'],
    ['a code block in a quote ends with the quote: the link after it is a link', '> ```\n> <https://x.io|a>\n<https://y.io|b>',
      '> ```\n> &lt;https://x.io|a&gt;\n> ```\n\n<https://y.io|b>'],
    ['a shorter run does not end a longer fence; the same run does', '~~~~\n<https://x.io|a>\n~~~\n<https://y.io|b>\n~~~~\n<https://z.io|c>',
      '```\n&lt;https://x.io|a&gt;\n~~~\n&lt;https://y.io|b&gt;\n```\n\n<https://z.io|c>'],
    ['~~~ does not end a ``` block', '```\n<https://x.io|a>\n~~~\n<https://y.io|b>\n```\n<https://z.io|c>',
      '```\n&lt;https://x.io|a&gt;\n~~~\n&lt;https://y.io|b&gt;\n```\n\n<https://z.io|c>'],
    ['a fence with a language does not end a block', '~~~\n<https://x.io|a>\n~~~js\n<https://y.io|b>\n~~~\n<https://z.io|c>',
      '```\n&lt;https://x.io|a&gt;\n~~~js\n&lt;https://y.io|b&gt;\n```\n\n<https://z.io|c>'],
    ['an indented fenced block is code; the link after it is a link', '  ```\n  <https://x.io|a>\n  ```\n<https://y.io|b>',
      '```\n&lt;https://x.io|a&gt;\n```\n\n<https://y.io|b>'],
    ['``` with a backtick after it is not a fence', '``` a`b <https://x.io|a>', '``` a`b <https://x.io|a>'],
    ['a code span does not run across a blank line', '`a\n\n<https://x.io|b> c`', '`a\n\n<https://x.io|b> c`'],
  ])('%s', (_name, markdown, expected) => {
    expect(renderMrkdwn(markdown)).toBe(expected);
  });
});

