import { describe, expect, it } from 'vitest';
import { DISCORD_MESSAGE_LIMIT, splitDiscordText } from '../../../channels/discord/render.ts';

const words = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');

describe('splitDiscordText: a blank line that keeps both paragraphs whole in as many messages wins', () => {
  it('ends the first message at the blank line (in its first half) rather than mid-way through the second paragraph', () => {
    const first = 'First paragraph is short and whole.';
    const second = `${words(15, 'word')} end of the second one.`;
    expect(splitDiscordText(`${first}\n\n${second}`, 120)).toEqual([first, second]);
  });

  it('at Discord\'s own limit too', () => {
    const first = words(60, 'a'); // ~ 230 characters
    const second = words(400, 'b'); // ~ 1,900 characters: with the first, over 2,000; alone, one message
    const chunks = splitDiscordText(`${first}\n\n${second}`);
    expect(chunks).toEqual([first, second]);
    expect(Math.max(...chunks.map((c) => c.length))).toBeLessThanOrEqual(DISCORD_MESSAGE_LIMIT);
  });

  it('keeps cutting mid-paragraph when the blank line would cost a message more', () => {
    const first = 'Short opener here.';
    const second = `${words(16, 'word')} end of it.`; // 112 characters: alone, one message; with the third, two
    const third = 'A third paragraph that fits with the tail.';
    const chunks = splitDiscordText(`${first}\n\n${second}\n\n${third}`, 120);
    expect(chunks).toHaveLength(2);
    expect(chunks[0]!.startsWith(`${first}\n\nword0 `)).toBe(true);
    expect(chunks[1]!.endsWith(`\n\n${third}`)).toBe(true);
  });

  it('prefers the latest such blank line, and only when the messages stay as many', () => {
    const text = `${words(3, 'x')}\n\n${words(3, 'y')}\n\n${words(30, 'z')}`;
    expect(splitDiscordText(text, 120)).toEqual([`${words(3, 'x')}\n\n${words(3, 'y')}`, words(30, 'z')]);
  });
});
