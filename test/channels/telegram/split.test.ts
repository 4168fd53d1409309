import { describe, expect, it } from 'vitest';
import { htmlToPlainText, splitHtml, TELEGRAM_TEXT_LIMIT } from '../../../channels/telegram/split-html.ts';

/** Each case gives the exact messages, so a cut in the wrong place (or inside an emoji) shows. */
describe('splitHtml: where messages end', () => {
  it.each([
    ['at a space in the second half', 'aaaa bbbb cccc', 10, ['aaaa bbbb', 'cccc']],
    ['at a blank line rather than a later space', 'aa bb\n\ncc dd ee', 12, ['aa bb', 'cc dd ee']],
    ['at the latest break when the only line break is in the first half', 'a\nbb cc dd', 6, ['a\nbb', 'cc dd']],
    ['words, one message each when two do not fit', 'one two three four', 9, ['one two', 'three', 'four']],
    ['an entity counts as the one character it shows', '&amp;&amp;&amp; x', 4, ['&amp;&amp;&amp;', 'x']],
    ['text exactly at the limit stays whole', 'abcd', 4, ['abcd']],
    ['a word longer than a message is cut between characters', 'abcdefghij', 4, ['abcd', 'efgh', 'ij']],
    ['never inside an emoji with a skin tone', 'aaaaaaaaa👍🏽b', 10, ['aaaaaaaaa', '👍🏽b']],
    ['never inside a flag', '🇫🇷🇫🇷🇫🇷', 4, ['🇫🇷', '🇫🇷', '🇫🇷']],
  ])('%s', (_name, html, limit, expected) => {
    expect(splitHtml(html, limit)).toEqual(expected);
  });
});

describe('splitHtml: spans', () => {
  it('bold longer than a message is closed at the cut and reopened', () => {
    expect(splitHtml('<b>one two three</b>', 8)).toEqual(['<b>one two</b>', '<b>three</b>']);
  });

  it('nested spans that fit stay in one message', () => {
    expect(splitHtml('<b>bold <i>both</i></b> plain', 9)).toEqual(['<b>bold <i>both</i></b>', 'plain']);
  });

  it("a link that fits moves whole to the next message; its URL counts towards the limit", () => {
    expect(splitHtml('see <a href="https://e.x">the docs page</a>', 26)).toEqual(['see', '<a href="https://e.x">the docs page</a>']);
    // 11 units of URL + 13 of text fit in 24 exactly, not in 23: there the link is cut and reopened instead.
    expect(splitHtml('see <a href="https://e.x">the docs page</a>', 24)).toEqual(['see', '<a href="https://e.x">the docs page</a>']);
    expect(splitHtml('see <a href="https://e.x">the docs page</a>', 23)).toEqual(['see <a href="https://e.x">the docs</a>', '<a href="https://e.x">page</a>']);
  });

  it('a link whose URL is longer than half a message becomes its text and the URL, never a character per message', () => {
    expect(splitHtml('see <a href="https://e.x/aa">the docs</a>', 28)).toEqual(['see <a href="https://e.x/aa">the docs</a>']);
    expect(splitHtml('see <a href="https://e.x/aa">the docs</a>', 24)).toEqual(['see the docs', '(https://e.x/aa)']);
    const url = `https://e.x/${'a'.repeat(3000)}`;
    const parts = splitHtml(`<b>x <a href="${url}">docs</a></b> end`, 1024);
    expect(parts.length).toBe(3);
    expect(parts[0]!.startsWith('<b>x docs (https://e.x/aaa')).toBe(true);
    expect(parts.at(-1)!.endsWith(')</b> end')).toBe(true);
  });

  it('a code block that fits moves whole to the next message', () => {
    expect(splitHtml('intro words\n\n<pre><code>x = 1\ny = 2</code></pre>', 16)).toEqual(['intro words', '<pre><code>x = 1\ny = 2</code></pre>']);
  });

  it('a short line between a paragraph and a code block that moves on stays with the paragraph rather than alone', () => {
    const paragraph = Array.from({ length: 12 }, () => 'word').join(' ');
    const code = `<pre><code>${Array.from({ length: 4 }, (_, i) => `line ${i} of the code block, ok`).join('\n')}</code></pre>`;
    expect(splitHtml(`${paragraph}\n\n• step\n${code}`, 120)).toEqual([`${paragraph}\n\n• step`, code]);
  });

  it('a stray closing tag is dropped and a tag left open is closed', () => {
    expect(splitHtml('x</b>y<u>z', 10)).toEqual(['xy<u>z</u>']);
  });

  it('a reply within the limit is one message, unchanged', () => {
    const text = `<b>hi</b> ${'a'.repeat(TELEGRAM_TEXT_LIMIT - 3)}`;
    expect(splitHtml(text)).toEqual([text]);
    expect(splitHtml(`${text}a`)).toHaveLength(2);
  });
});

describe('splitHtml: code and escapes', () => {
  it('inline code may end a message after a space; a pre block only at a line end, else between characters', () => {
    expect(splitHtml('<code>aaa bb cc</code>', 5)).toEqual(['<code>aaa </code>', '<code>bb cc</code>']);
    expect(splitHtml('<pre>aaa bb cc</pre>', 5)).toEqual(['<pre>aaa b</pre>', '<pre>b cc</pre>']);
  });

  it('a pre block too long for one message starts a message of its own, then is cut at line ends', () => {
    expect(splitHtml('aa bb cc\n\n<pre>line0\nline1\nline2\nline3\nline4\nline5</pre>', 20))
      .toEqual(['aa bb cc', '<pre>line0\nline1\nline2</pre>', '<pre>line3\nline4\nline5</pre>']);
  });

  it('an & < > with a combining mark is escaped again', () => {
    expect(splitHtml('a &amp;\u0301 b &lt;\u0301')).toEqual(['a &amp;\u0301 b &lt;\u0301']);
  });
});

describe('htmlToPlainText', () => {
  it('the last code point is a character; one past it is nothing', () => {
    expect(htmlToPlainText('&#x10ffff;|&#1114111;|&#x110000;')).toBe('\u{10FFFF}|\u{10FFFF}|');
  });

  it('drops tags and decodes the entities Telegram knows, named and numeric', () => {
    expect(htmlToPlainText('&lt;&gt;&amp;&quot;&#65;&#x42;&#X43;<b>t</b>')).toBe('<>&"ABCt');
  });

  it('an out-of-range character reference becomes nothing', () => {
    expect(htmlToPlainText('a&#99999999;b&#x110000;c')).toBe('abc');
  });
});
