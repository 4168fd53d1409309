import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { graphemes, splitMarkup, textAtoms, type MarkupAtom } from '../../src/core/text-split.ts';

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
const PIECES = ['a', 'Z', ' ', '\n', '\r', '漢', '한', '\u11A8', '👨', '👩', '\u200D', '🏽', '\uFE0F', '🇫', '🇷', '\u0301', '1', '\u20E3', '<', '&', '\u0600', 'ก', '\u0E33', '🏴', '\u{E0067}', '\u{E007F}', 'क', '\u094D', 'ष'];

describe('graphemes', () => {
  it('agrees with Intl.Segmenter, which it only calls where code points may join', () => {
    fc.assert(fc.property(fc.array(fc.constantFrom(...PIECES), { maxLength: 24 }), (pieces) => {
      const text = pieces.join('');
      expect(graphemes(text)).toEqual([...segmenter.segment(text)].map((s) => s.segment));
    }), { numRuns: 3000 });
  });

  it('cuts a pathological cluster (stacked marks) into pieces of at most 32 units, between code points', () => {
    const zalgo = `a${'\u0301'.repeat(100)}b`;
    const out = graphemes(zalgo);
    expect(out.join('')).toBe(zalgo);
    for (const g of out) expect(g.length).toBeLessThanOrEqual(32);
    expect(out.map((g) => g.length)).toEqual([32, 32, 32, 5, 1]);
  });
});

describe('splitMarkup', () => {
  const open = (raw: string): MarkupAtom => ({ kind: 'open', raw, units: raw.length, close: raw, closeUnits: raw.length });
  const close = (raw: string): MarkupAtom => ({ kind: 'close', raw, units: raw.length });

  it('moves a span that fits to the next message instead of cutting it, and closes and reopens one that does not', () => {
    const fits = [...textAtoms('aaaa bbbb '), open('*'), ...textAtoms('cc dd'), close('*'), ...textAtoms(' ee')];
    expect(splitMarkup(fits, 14)).toEqual(['aaaa bbbb', '*cc dd* ee']);
    const long = [open('*'), ...textAtoms('one two three four five six'), close('*')];
    expect(splitMarkup(long, 12)).toEqual(['*one two*', '*three four*', '*five six*']);
  });

  it('drops empty spans and whitespace at the edges, and never sends an empty message', () => {
    expect(splitMarkup([open('*'), ...textAtoms('   '), close('*'), ...textAtoms('\n\n')], 10)).toEqual([]);
    expect(splitMarkup([...textAtoms('  hello  '), open('_'), close('_')], 10)).toEqual(['hello']);
  });
});

describe('textAtoms', () => {
  it('spaces, tabs and line breaks are break points dropped at a message edge; a blank line is the best break', () => {
    expect(textAtoms('a b\n\nc\td')).toEqual([
      { kind: 'text', raw: 'a', units: 1 },
      { kind: 'text', raw: ' ', units: 1, breakAfter: 0, trim: true },
      { kind: 'text', raw: 'b', units: 1 },
      { kind: 'text', raw: '\n', units: 1, breakAfter: 2, trim: true },
      { kind: 'text', raw: '\n', units: 1, breakAfter: 3, trim: true },
      { kind: 'text', raw: 'c', units: 1 },
      { kind: 'text', raw: '\t', units: 1, breakAfter: 0, trim: true },
      { kind: 'text', raw: 'd', units: 1 },
    ]);
  });

  it('in code, spaces are content and line breaks weaker; codeSpaceBreaks lets a message end after a space', () => {
    expect(textAtoms('x y\nz', { code: true })).toEqual([
      { kind: 'text', raw: 'x', units: 1 },
      { kind: 'text', raw: ' ', units: 1 },
      { kind: 'text', raw: 'y', units: 1 },
      { kind: 'text', raw: '\n', units: 1, breakAfter: 1, trim: true },
      { kind: 'text', raw: 'z', units: 1 },
    ]);
    expect(textAtoms('x y', { code: true, codeSpaceBreaks: true })[1]).toEqual({ kind: 'text', raw: ' ', units: 1, breakAfter: 0 });
  });

  it('an escape counts as its markup, or with count text as the character it shows', () => {
    const escape = (g: string) => (g === '&' ? '&amp;' : g);
    expect(textAtoms('&é', { escape })).toEqual([{ kind: 'text', raw: '&amp;', units: 5 }, { kind: 'text', raw: 'é', units: 1 }]);
    expect(textAtoms('&é', { escape, count: 'text' })).toEqual([{ kind: 'text', raw: '&amp;', units: 1 }, { kind: 'text', raw: 'é', units: 1 }]);
  });

  it('CJK text may end a message after its punctuation; CRLF is one line break of two units', () => {
    expect(textAtoms('漢。字\r\nx')).toEqual([
      { kind: 'text', raw: '漢', units: 1 },
      { kind: 'text', raw: '。', units: 1, breakAfter: 0 },
      { kind: 'text', raw: '字', units: 1 },
      { kind: 'text', raw: '\r\n', units: 2, breakAfter: 2, trim: true },
      { kind: 'text', raw: 'x', units: 1 },
    ]);
    expect(splitMarkup(textAtoms('漢字漢字。漢字漢字。'), 6)).toEqual(['漢字漢字。', '漢字漢字。']);
  });
});

describe('splitMarkup: reopening, blocks, nesting', () => {
  const open = (raw: string, more: Partial<Omit<Extract<MarkupAtom, { kind: 'open' }>, 'kind'>> = {}): MarkupAtom => ({ kind: 'open', raw, units: raw.length, close: raw, closeUnits: raw.length, ...more });
  const close = (raw: string): MarkupAtom => ({ kind: 'close', raw, units: raw.length });

  it('a span is reopened with its reopen markup when it has one', () => {
    const link = [open('[', { close: '](u)', closeUnits: 4, reopen: '[>', reopenUnits: 2 }), ...textAtoms('aa bb cc dd'), close('](u)')];
    expect(splitMarkup(link, 10)).toEqual(['[aa bb](u)', '[>cc](u)', '[>dd](u)']);
  });

  it('a block too long for one message starts a message of its own', () => {
    const pre = [...textAtoms('aa bb '), open('<pre>', { units: 0, close: '</pre>', closeUnits: 0, block: true }), ...textAtoms('l1\nl2\nl3', { code: true }), close('</pre>')];
    expect(splitMarkup(pre, 8)).toEqual(['aa bb', '<pre>l1\nl2</pre>', '<pre>l3</pre>']);
  });

  it('nested spans close in order; an empty span after them is dropped', () => {
    expect(splitMarkup([open('*'), open('_'), ...textAtoms('a'), close('_'), close('*'), ...textAtoms(' '), open('*'), close('*')], 10)).toEqual(['*_a_*']);
  });

  it('a word longer than a message fills each message', () => {
    expect(splitMarkup(textAtoms('abcdefgh ij'), 4)).toEqual(['abcd', 'efgh', 'ij']);
  });
});

describe('textAtoms and splitMarkup: edges', () => {
  it('a space carrying a combining mark is a visible character, not a break', () => {
    expect(textAtoms(' \u0301x')).toEqual([{ kind: 'text', raw: ' \u0301', units: 2 }, { kind: 'text', raw: 'x', units: 1 }]);
  });

  it('a line break at the very start is a line break, not a blank line', () => {
    expect(textAtoms('\nx')[0]).toEqual({ kind: 'text', raw: '\n', units: 1, breakAfter: 2, trim: true });
  });

  it('an atom longer than a message (a mention) is sent whole, on its own', () => {
    expect(splitMarkup([...textAtoms('ab '), { kind: 'text', raw: '<@1234567>', units: 10 }, ...textAtoms(' cd')], 6)).toEqual(['ab', '<@1234567>', 'cd']);
  });
});

describe('splitMarkup: startRaw', () => {
  it('an atom that starts a message is sent as its startRaw, elsewhere as its raw', () => {
    const gt: MarkupAtom = { kind: 'text', raw: '>', units: 2, startRaw: '\\>' };
    const atoms: MarkupAtom[] = [...textAtoms('ab '), gt, ...textAtoms(' cd '), gt];
    expect(splitMarkup(atoms, 20)).toEqual(['ab > cd >']);
    expect(splitMarkup(atoms, 4)).toEqual(['ab', '\\>', 'cd', '\\>']);
  });
});

