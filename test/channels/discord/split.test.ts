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
