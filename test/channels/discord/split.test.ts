import { describe, expect, it } from 'vitest';
import { DISCORD_MESSAGE_LIMIT, splitDiscordText } from '../../../channels/discord/render.ts';

/** Each case gives the exact messages, so a cut in the wrong place (or inside an emoji) shows. */
describe('splitDiscordText: where messages end', () => {
  it.each([
    ['at a space in the second half', 'aaaa bbbb cccc', 10, ['aaaa bbbb', 'cccc']],
    ['between paragraphs', 'first para\n\nsecond para', 15, ['first para', 'second para']],
    ['never inside an emoji with a skin tone', 'aaaaaaaaa👍🏽b', 10, ['aaaaaaaaa', '👍🏽b']],
    ['never inside a surrogate pair', `${'a'.repeat(9)}😀${'b'.repeat(3)}`, 10, ['a'.repeat(9), `😀${'b'.repeat(3)}`]],
    ['CRLF counts as one line break', 'a\r\nb', 10, ['a\nb']],
    ['bold longer than a message is closed and reopened', '**bold words here** and', 12, ['**bold**', '**words**', '**here** and']],
    ['a long URL is written out as text, after its label', 'see [docs](https://e.x/a) now', 20, ['see docs', '(https://e.x/a) now']],
  ])('%s', (_name, text, limit, expected) => {
    expect(splitDiscordText(text, limit)).toEqual(expected);
  });

  it.each([
    ['a blank line is a better place to end than a later line break', 'aaaa\n\nbbbb\ncc', 12, ['aaaa', 'bbbb\ncc']],
    ['several blank lines are one paragraph break', 'aaaa\n\n\nbbbb cc', 12, ['aaaa', 'bbbb cc']],
    ['a code block never closed in the text is still closed in every message', '```\nunclosed one\nunclosed two', 20, ['```\nunclosed one\n```', '```\nunclosed two\n```']],
    ['text after a closed code block is prose again', '```\nabc\n```\nafter text here', 14, ['```\nabc\n```', 'after text', 'here']],
  ])('%s', (_name, text, limit, expected) => {
    expect(splitDiscordText(text, limit)).toEqual(expected);
  });

  it('a code block cut in two is closed and reopened with its language', () => {
    expect(splitDiscordText('```js\nline one\nline two\nline three\n```', 24)).toEqual(['```js\nline one\n```', '```js\nline two\n```', '```js\nline three\n```']);
  });

  it('exactly the limit is one message; one more character is two, the cut between the 2000th and 2001st', () => {
    const full = 'x'.repeat(DISCORD_MESSAGE_LIMIT);
    expect(splitDiscordText(full)).toEqual([full]);
    expect(splitDiscordText(`${full}y`)).toEqual([full, 'y']);
  });

  it('blank text is no message', () => {
    expect(splitDiscordText(' \n\t ')).toEqual([]);
    expect(splitDiscordText('')).toEqual([]);
  });
});

/** Markdown inside a paragraph as Discord reads it: what is kept whole, what is closed and reopened, what is only text. */
describe('splitDiscordText: inline markdown at a cut', () => {
  it.each([
    ['a code span longer than a message is closed and reopened; its spaces stay inside', '`aaa bbb ccc`', 9, ['`aaa `', '`bbb ccc`']],
    ['a code span that fits moves whole', 'xx yy `code here` zz', 14, ['xx yy', '`code here` zz']],
    ['a backtick without a partner is text', 'a `not code b c d e f', 8, ['a `not', 'code b c', 'd e f']],
    ['a double-backtick span holds a single backtick', 'x ``a ` b`` y z w', 10, ['x', '``a ` b``', 'y z w']],
    ['a masked link that fits moves whole', 'see [the docs](https://e.x) now', 24, ['see', '[the docs](https://e.x)', 'now']],
    ['a masked link too long becomes two links to the same URL', '[one two three four](https://e.x)', 30, ['[one two three](https://e.x)', '[four](https://e.x)']],
    ['angle-bracket and parenthesised link targets', 'see [x y](<https://e.x/a>) and [z](https://e.x/(b)) more words', 30, ['see [x y](<https://e.x/a>) and', '[z](https://e.x/(b)) more', 'words']],
    ['an autolink is one word', 'go <https://e.x/abc> now and then some more', 40, ['go <https://e.x/abc> now and then some', 'more']],
    ['an autolink longer than half a message is written bare', 'go <https://e.x/abcdefghijklmnopq> now and then', 40, ['go https://e.x/abcdefghijklmnopq now and', 'then']],
    ['mentions, channels, custom emoji and timestamps are kept whole', 'hi <@123456> and <#456789> and <:smile:789> <t:1700000000:R> ok', 16, ['hi <@123456> and', '<#456789> and', '<:smile:789>', '<t:1700000000:R>', 'ok']],
    ['escaped stars are text, kept with their backslash', 'a \\*not\\* b c d e', 8, ['a', '\\*not\\*', 'b c d e']],
    ['underscores and stars in a bare URL are not emphasis', 'see https://e.x/a_b_c*d* now ok', 12, ['see https://', 'e.x/a_b_c*d*', 'now ok']],
    ['italics, underline, strike and spoilers that fit move whole', '_it is_ __und er__ ~~str ike~~ ||spo il||', 12, ['_it is_', '__und er__', '~~str ike~~', '||spo il||']],
    ['bold italics are closed and reopened together', '***bold ital*** x', 10, ['***bold***', '***ital***', 'x']],
    ['four stars are text', '****four**** y z', 8, ['****four', '**** y z']],
    ['one tilde or one bar is text', '~one two~ three', 8, ['~one', 'two~', 'three']],
    ['one bar is text', '|a b c d| e', 6, ['|a b c', 'd| e']],
    ['two tildes strike', '~~one two~~ three', 9, ['~~one~~', '~~two~~', 'three']],
    ['stars, underscores and bars around words', '*a b c d* e', 6, ['*a b*', '*c d*', 'e']],
    ['double stars', '**a b c d** e', 7, ['**a b**', '**c d**', 'e']],
    ['double underscores', '__a b c d__ e', 7, ['__a b__', '__c d__', 'e']],
    ['spoiler bars', '||a b c d|| e', 7, ['||a b||', '||c d||', 'e']],
    ['underscores inside words are text', 'a_b c d_e f g', 6, ['a_b c', 'd_e f', 'g']],
    ['an underscore that opens inside a word is text', '_a b c_d e', 6, ['_a b', 'c_d e']],
    ['an underscore after a word and before a space, and one before a word at the end, do not pair', 'word_ a b c _x', 6, ['word_', 'a b c', '_x']],
    ['stars between spaces are text', '2 * 3 4 5 6 * 7', 6, ['2 * 3', '4 5 6', '* 7']],
    ['emphasis around punctuation: open after a space, close before one', '_(x y z)_ w', 6, ['_(x y_', '_z)_ w']],
    ['star emphasis around punctuation', '*(a b c)* d', 7, ['*(a b*', '*c)* d']],
    ['an underscore between a letter and punctuation does not open', 'x_(y z)_ w', 6, ['x_(y', 'z)_ w']],
    ['a star between a letter and punctuation does not open', 'a*(b c d)* e', 7, ['a*(b c', 'd)* e']],
    ['escaped stars never pair into emphasis', 'a \\*b c d e\\* f', 6, ['a \\*b', 'c d', 'e\\* f']],
    ['underscores that can only close do not pair with each other', 'a_ b c d_ e', 6, ['a_ b c', 'd_ e']],
    ['emphasis does not cross a blank line, even one holding spaces', '*a\n  \nb* c d e', 5, ['*a', 'b* c', 'd e']],
    ['a link URL of exactly half a message stays a link; one character more and it is text', '[a b c](https://e.x/a) d e f g', 26, ['[a b c](https://e.x/a) d e', 'f g']],
    ['(the longer URL)', '[a b c](https://e.x/ab) d e f g', 26, ['a b c (https://e.x/ab) d e', 'f g']],
  ])('%s', (_name, text, limit, expected) => {
    expect(splitDiscordText(text, limit)).toEqual(expected);
  });
});

describe('splitDiscordText: lines, paragraphs and code blocks', () => {
  it('a blank line is a better place to end a message than a later line break', () => {
    expect(splitDiscordText('aaaaaa\n\nbb\ncc', 12)).toEqual(['aaaaaa', 'bb\ncc']);
    expect(splitDiscordText('aaa\nbbb\nccc', 8)).toEqual(['aaa\nbbb', 'ccc']);
  });

  it('a lone CR is a line break too', () => {
    expect(splitDiscordText('a\rb\rc', 3)).toEqual(['a\nb', 'c']);
  });

  it('a code block cut before an indented line keeps the indentation', () => {
    expect(splitDiscordText('```\nfirst line\n    indented\n```', 20)).toEqual(['```\nfirst line\n```', '```\n    indented\n```']);
  });

  it('a ~~~ fence is reopened as ~~~ with its language; text around a block keeps its own messages', () => {
    expect(splitDiscordText('~~~py\nline one\nline two\n~~~', 20)).toEqual(['~~~py\nline one\n~~~', '~~~py\nline two\n~~~']);
    expect(splitDiscordText('intro\n```\ncode one\ncode two\n```\nafter', 16)).toEqual(['intro', '```\ncode one\n```', '```\ncode two\n```', 'after']);
    expect(splitDiscordText('words here\n```\nabc\n```\n\nmore words', 12)).toEqual(['words here', '```\nabc\n```', 'more words']);
  });

  it('an opening line too long to repeat is sent once and the block reopened bare', () => {
    expect(splitDiscordText(`\`\`\`${'x'.repeat(12)}\nline one\nline two\n\`\`\``, 24)).toEqual([`\`\`\`${'x'.repeat(12)}\n\`\`\``, '```\nline one\n```', '```\nline two\n```']);
  });
});

describe('splitDiscordText: quotes, list items and inline markup', () => {
  it.each([
    ['an unclosed block in a quote is closed where the quote ends; the next line is prose', `> \`\`\`\n> code\n${'prose '.repeat(8)}end`, 40, ['> ```\n> code\n> ```\nprose prose prose', 'prose prose prose prose prose end']],
    ['a closing line padded with spaces is closed with the fence alone', `\`\`\`\ncode\n\`\`\`${' '.repeat(30)}\nafter`, 14, ['```\ncode\n```', 'after']],
    ['a quoted line cut at a space keeps its marker in the next message', '> aaaa bbbb cccc dddd', 12, ['> aaaa bbbb', '> cccc dddd']],
    ['a quoted line cut hard keeps its marker in the next message', `> ${'x'.repeat(14)}`, 10, ['> xxxxxxxx', '> xxxxxx']],
    ['a blank quoted line at a cut is dropped at both edges', '> aaaa\n>\n> bbbb', 8, ['> aaaa', '> bbbb']],
    ['quoted code lines are quoted after every cut', '> ```\n> aaaa\n> bbbb\n> ```', 18, ['> ```\n> aaaa\n> ```', '> ```\n> bbbb\n> ```']],
    ['a long quoted code line is cut inside the quote', `> \`\`\`\n> ${'y'.repeat(12)}\n> \`\`\``, 20, ['> ```\n> yyyyyy\n> ```', '> ```\n> yyyyyy\n> ```']],
    ['a block opened on a list marker line is closed and reopened without the marker', '1. ```sh\n   aaaaaaaaaa\n   bbbbbbbbbb\n   ```', 38, ['1. ```sh\n   aaaaaaaaaa\n   ```', '   ```sh\n   bbbbbbbbbb\n   ```']],
    ['a bare URL leaves the closing ** and the full stop outside', '**Source: the https://x.com**. More', 24, ['**Source: the**', '**https://x.com**. More']],
    ['a bare URL keeps its own balanced parentheses', 'See https://w.org/A_(b) now ok', 26, ['See https://w.org/A_(b)', 'now ok']],
    ['**a *b*** pairs: both spans close and reopen', '**aaa *bbb ccc***', 12, ['**aaa**', '***bbb***', '***ccc***']],
    ['***a** b* pairs: both spans close and reopen', '***aaa bbb** ccc*', 12, ['***aaa***', '***bbb***', '*ccc*']],
    ['a long link with a title falls back to its text and URL, without the title', `[t](https://e.x/${'a'.repeat(20)} "Title") end`, 40, [`t (https://e.x/${'a'.repeat(20)}) end`]],
  ])('%s', (_name, text, limit, expected) => {
    expect(splitDiscordText(text, limit)).toEqual(expected);
  });

  it('a mention, emoji or command too long to be one is text, which a split may cut', () => {
    for (const text of [`<@${'1'.repeat(3000)}>`, `</${'a'.repeat(3000)}:1>`, `<:${'e'.repeat(3000)}:1>`]) {
      const chunks = splitDiscordText(text);
      expect(chunks.length).toBe(2);
      for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(2000);
    }
    expect(splitDiscordText(`<@${'1'.repeat(20)}> ${'w '.repeat(20)}`, 30)[0]).toBe(`<@${'1'.repeat(20)}> w w w`);
  });

  it('runs of backticks too long to close and reopen at each cut are text: every message is within the limit', () => {
    const span = `${'`'.repeat(1000)} code ${'word '.repeat(500)}${'`'.repeat(1000)}`;
    const block = `${'`'.repeat(1000)}\n${'line\n'.repeat(600)}${'`'.repeat(1000)}`;
    for (const text of [span, block]) {
      const chunks = splitDiscordText(text);
      expect(chunks.length).toBe(3);
      for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(2000);
    }
    const [t16, t17] = ['`'.repeat(16), '`'.repeat(17)];
    expect(splitDiscordText(`${t16}a bb cc${t16}`, 36)).toEqual([`${t16}a ${t16}`, `${t16}bb ${t16}`, `${t16}cc${t16}`]);
    expect(splitDiscordText(`${t17}a bb cc${t17}`, 36)).toEqual([`${t17}a bb`, `cc${t17}`]);
  });
});

describe('splitDiscordText: where a code block ends', () => {
  it.each([
    ['a reply that fits is sent as written, an unclosed block included', '```\ncode', 2000, ['```\ncode']],
    ['a closing run of 3,000 backticks is closed with the opening fence', `\`\`\`\ncode\n${'`'.repeat(3000)}\nafter`, 2000, ['```\ncode\n```\nafter']],
    ['a closing run up to 4 longer than the fence is kept as written', '```\naaaa\n```````\nafter words', 16, ['```\naaaa\n```````', 'after words']],
    ['a closing run 5 longer than the fence is the fence', '```\naaaa\n````````\nafter words', 16, ['```\naaaa\n```', 'after words']],
    ['a fence alone on the last line opens an empty block, which is not sent', 'aaaa bbbb cccc\n```', 12, ['aaaa bbbb', 'cccc']],
    ['~~~ does not close a ``` block', '```\ncode\n~~~\nmore code line', 16, ['```\ncode\n~~~\n```', '```\nmore cod\n```', '```\ne line\n```']],
    ['a shorter run does not close a longer fence', '````\ncode\n```\nmore code line', 18, ['````\ncode\n```\n````', '````\nmore cod\n````', '````\ne line\n````']],
    ['a fence with a language does not close a block', '```\ncode\nmore code line\n```js', 16, ['```\ncode\n```', '```\nmore cod\n```', '```\ne line\n```', '```\n```js\n```']],
    ['backticks after text do not close a block', '```\ncode\nmore code line\nx ```', 16, ['```\ncode\n```', '```\nmore cod\n```', '```\ne line\n```', '```\nx ```\n```']],
    ['spaces after the language are not repeated when the block is reopened', '```js   \naaaa\nbbbb\n```', 20, ['```js   \naaaa\n```', '```js\nbbbb\n```']],
  ])('%s', (_name, text, limit, expected) => {
    expect(splitDiscordText(text, limit)).toEqual(expected);
  });
});

describe('splitDiscordText: quoted lines in a paragraph', () => {
  it.each([
    ['quoted lines then plain lines: the plain ones are not quoted', '> quoted line\nplain words here and more', 20, ['> quoted line', 'plain words here and', 'more']],
    ['plain lines then quoted lines: the quoted ones are', 'plain words\n> quoted words here', 14, ['plain words', '> quoted words', '> here']],
    ['every line of a quote keeps its own marker inside a message', '> aa\n>\n> bb\n> cc dd ee ff gg', 16, ['> aa\n>\n> bb', '> cc dd ee ff gg']],
    ['a quote after a code block and a blank line', '```js\naaaa\nbbbb\n```\n\n> quoted words here\n> and more of them', 20, ['```js\naaaa\nbbbb\n```', '> quoted words here', '> and more of them']],
  ])('%s', (_name, text, limit, expected) => {
    expect(splitDiscordText(text, limit)).toEqual(expected);
  });
});

describe('splitDiscordText: a cut before > or #', () => {
  it.each([
    ['a > that a cut puts at the start of a message is escaped, not a quote', 'aaaa bbbb > cccc', 10, ['aaaa bbbb', '\\> cccc']],
    ['a # that a cut puts at the start of a message is escaped, not a heading', 'aaaa bbbb # 5 is done', 10, ['aaaa bbbb', '\\# 5 is', 'done']],
    ['a - that a cut puts at the start of a message is escaped, not a list item', 'aaaa bbbb - cccc', 10, ['aaaa bbbb', '\\- cccc']],
    ['after a reopened span it is not at the start: left as is', '**aaaa bbbb > cccc**', 14, ['**aaaa bbbb**', '**> cccc**']],
  ])('%s', (_name, text, limit, expected) => {
    expect(splitDiscordText(text, limit)).toEqual(expected);
  });
});

describe('splitDiscordText: emphasis and URLs in long text', () => {
  it.each([
    ['underscores in a bare URL are not emphasis', 'see https://x.com/a_b_c_d and more words', 30, ['see https://x.com/a_b_c_d and', 'more words']],
    ['a URL inside a word is not a bare URL: its underscores are text', 'xhttps://x.com/a_b_ and _more words here_', 24, ['xhttps://x.com/a_b_ and', '_more words here_']],
    ['*a**b*: the inner ** is text (the rule of 3)', '*aaaa**bbbb cccc dddd*', 12, ['*aaaa**bbbb*', '*cccc dddd*']],
    ['***a b*** is bold and italic, closed and reopened as such', '***aaaa bbbb***', 12, ['***aaaa***', '***bbbb***']],
    ['__, ~~ and || pair and reopen', '__aaaa bbbb__ ~~cccc dddd~~ ||eeee ffff||', 12, ['__aaaa__', '__bbbb__', '~~cccc~~', '~~dddd~~', '||eeee||', '||ffff||']],
    ['bold after bold, with plain text between', '**aaaa** bbbb **cccc dddd**', 12, ['**aaaa**', 'bbbb', '**cccc**', '**dddd**']],
    ['bold and bold-italic in one line', 'a **b** c ***d e*** f', 8, ['a **b**', 'c', '***d***', '***e***', 'f']],
    ['*a b**c*: one italic span (the rule of 3), cut at its space', '*aaaa bbbb**cccc*', 12, ['*aaaa*', '*bbbb**cccc*']],
    ['a closing run used up does not open again', '**aaaa** bbbb*', 10, ['**aaaa**', 'bbbb*']],
    ['a * never closes a _', '_aaaa bbbb cccc dddd*', 12, ['_aaaa bbbb', 'cccc dddd*']],
    ['an autolink up to half a message stays one', '<https://x.com/abcdef> and some more words here', 40, ['<https://x.com/abcdef> and some more', 'words here']],
    ['a longer autolink is written bare', '<https://x.com/abcdefg> and some more words here', 40, ['https://x.com/abcdefg and some more', 'words here']],
  ])('%s', (_name, text, limit, expected) => {
    expect(splitDiscordText(text, limit)).toEqual(expected);
  });
});

