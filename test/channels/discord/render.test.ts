import { describe, expect, it } from 'vitest';
import { DISCORD_MESSAGE_LIMIT, renderDiscord, splitDiscordText } from '../../../channels/discord/render.ts';

const fenceLines = (chunk: string) => chunk.split('\n').filter((l) => /^\s*(```|~~~)/.test(l) || /^>\s*```/.test(l));

describe('splitDiscordText', () => {
  it('leaves a message within the limit as it is, Discord markdown included', () => {
    const text = '**bold** __underline__ ||spoiler|| `code`\n> a quote\n# Heading\n- item';
    expect(splitDiscordText(text)).toEqual([text]);
    expect(splitDiscordText('   \n ')).toEqual([]);
  });

  it('splits prose between words, never inside one', () => {
    const words = Array.from({ length: 800 }, (_, i) => `word${i}`);
    const chunks = splitDiscordText(words.join(' '));
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(DISCORD_MESSAGE_LIMIT);
    expect(chunks.join(' ').split(' ')).toEqual(words);
  });

  it('prefers line boundaries', () => {
    const lines = Array.from({ length: 120 }, (_, i) => `Line number ${i} of the answer.`);
    const chunks = splitDiscordText(lines.join('\n'));
    expect(chunks.flatMap((c) => c.split('\n'))).toEqual(lines);
  });

  it('closes a code block at the end of a chunk and reopens it with its language in the next', () => {
    const code = Array.from({ length: 150 }, (_, i) => `print("row ${i}")`).join('\n');
    const text = `Run this:\n\n\`\`\`python\n${code}\n\`\`\`\n\nDone.`;
    const chunks = splitDiscordText(text);
    expect(chunks.length).toBeGreaterThanOrEqual(2);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(2000);
      expect(fenceLines(chunk).length % 2).toBe(0);
    }
    expect(chunks[0]!.endsWith('\n```')).toBe(true);
    expect(chunks[1]!.startsWith('```python\n')).toBe(true);
    expect(chunks.join('\n').replace(/\n```\n```python\n/g, '\n')).toBe(text);
  });

  it('never leaves an empty code block behind: an opening line that would end a chunk moves on', () => {
    const text = `${'a'.repeat(1990)}\n\`\`\`js\nconsole.log(1);\n\`\`\``;
    const chunks = splitDiscordText(text);
    expect(chunks).toEqual(['a'.repeat(1990), '```js\nconsole.log(1);\n```']);
  });

  it('handles tilde fences, fences inside quotes, and closes a fence the model forgot to close', () => {
    const tilde = `~~~\n${'x = 1\n'.repeat(60)}~~~`;
    for (const chunk of splitDiscordText(tilde, 100)) expect(fenceLines(chunk).length % 2).toBe(0);
    const quoted = `> \`\`\`sh\n${'> echo hello world\n'.repeat(12)}> \`\`\``;
    const quotedChunks = splitDiscordText(quoted, 100);
    expect(quotedChunks[1]!.startsWith('> ```sh\n')).toBe(true);
    for (const chunk of quotedChunks) expect(fenceLines(chunk).length % 2).toBe(0);
    const unclosed = `text\n\`\`\`\n${'line\n'.repeat(40)}last`;
    const chunks = splitDiscordText(unclosed, 100);
    expect(chunks.at(-1)!.endsWith('\n```')).toBe(true);
    for (const chunk of chunks) expect(fenceLines(chunk).length % 2).toBe(0);
  });

  it('cuts a word longer than a message, and a long line inside a code block stays inside it', () => {
    const chunks = splitDiscordText('y'.repeat(4500));
    expect(chunks.map((c) => c.length)).toEqual([2000, 2000, 500]);
    const long = splitDiscordText(`\`\`\`\n${'z'.repeat(3000)}\n\`\`\``);
    for (const chunk of long) {
      expect(chunk.length).toBeLessThanOrEqual(2000);
      expect(chunk.startsWith('```')).toBe(true);
      expect(chunk.endsWith('```')).toBe(true);
    }
  });

  it('does not split a surrogate pair', () => {
    const chunks = splitDiscordText(`${'a'.repeat(1999)}😀${'b'.repeat(10)}`);
    expect(chunks).toEqual(['a'.repeat(1999), `😀${'b'.repeat(10)}`]);
  });
});

describe('renderDiscord', () => {
  it('puts a notice line before the text', () => {
    expect(renderDiscord({ text: 'Hello!', notice: 'Started a new session.' })).toEqual(['Started a new session.\n\nHello!']);
  });
});
