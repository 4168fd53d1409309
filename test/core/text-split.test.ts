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
