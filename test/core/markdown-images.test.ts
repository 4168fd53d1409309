import { describe, expect, it } from 'vitest';
import { hasImageLines, splitImageLines } from '../../src/core/markdown-images.ts';

describe('splitImageLines (SPEC §15: an image alone on its line is sent natively)', () => {
  it('splits text, image, text in order, blank edges trimmed', () => {
    expect(splitImageLines('Here:\n![chart](https://example.com/c.png)\nDone.')).toEqual([
      { kind: 'text', text: 'Here:' },
      { kind: 'image', url: 'https://example.com/c.png', alt: 'chart' },
      { kind: 'text', text: 'Done.' },
    ]);
    expect(splitImageLines('\n\nA\n\n![x](http://e.com/a.jpg)\n\n\nB\n\n')).toEqual([
      { kind: 'text', text: 'A' },
      { kind: 'image', url: 'http://e.com/a.jpg', alt: 'x' },
      { kind: 'text', text: 'B' },
    ]);
  });

  it('takes a title, an angle-bracket URL, surrounding spaces and an empty alt; adjacent images stay separate', () => {
    expect(splitImageLines('  ![a](https://e.com/1.png "One")  \n![](<https://e.com/2.png>)\n![b](https://e.com/3.png \'t\')')).toEqual([
      { kind: 'image', url: 'https://e.com/1.png', alt: 'a' },
      { kind: 'image', url: 'https://e.com/2.png', alt: '' },
      { kind: 'image', url: 'https://e.com/3.png', alt: 'b' },
    ]);
  });

  it('leaves text alone: an image inside a line, other schemes, relative URLs, and images inside fenced code', () => {
    const inline = 'See ![x](https://e.com/a.png) here';
    expect(splitImageLines(inline)).toEqual([{ kind: 'text', text: inline }]);
    for (const line of ['![x](file:///etc/passwd)', '![x](data:image/png;base64,AAAA)', '![x](/local.png)', '![x](javascript:alert(1))']) {
      expect(splitImageLines(line)).toEqual([{ kind: 'text', text: line }]);
    }
    const fenced = '```md\n![x](https://e.com/a.png)\n```\n~~~~\n![y](https://e.com/b.png)\n~~~\n~~~~\n![z](https://e.com/c.png)';
    expect(splitImageLines(fenced)).toEqual([
      { kind: 'text', text: '```md\n![x](https://e.com/a.png)\n```\n~~~~\n![y](https://e.com/b.png)\n~~~\n~~~~' },
      { kind: 'image', url: 'https://e.com/c.png', alt: 'z' },
    ]);
    expect(hasImageLines(fenced.split('\n').slice(0, 3).join('\n'))).toBe(false);
  });

  it('nothing visible is no part; merged text keeps its inner blank lines', () => {
    expect(splitImageLines('')).toEqual([]);
    expect(splitImageLines('  \n\n')).toEqual([]);
    expect(splitImageLines('a\n\n\nb')).toEqual([{ kind: 'text', text: 'a\n\n\nb' }]);
  });
});
