import { describe, expect, it } from 'vitest';
import { renderSlackChunks } from '../../../channels/slack/render.ts';

/** Where Slack replies are cut, message by message (small limits so that the cuts are easy to read). */
describe('Slack splitting: spans across messages', () => {
  const words = (word: string, n: number) => Array(n).fill(word).join(' ');

  it('bold, italics and strike longer than a message are closed at the end of each message and reopened', () => {
    expect(renderSlackChunks(`**${words('bold', 6)}**`, 16)).toEqual(['*bold bold bold*', '*bold bold bold*']);
    expect(renderSlackChunks(`*${words('ital', 6)}*`, 16)).toEqual(['_ital ital ital_', '_ital ital ital_']);
    expect(renderSlackChunks(`~~${words('gone', 6)}~~`, 16)).toEqual(['~gone gone gone~', '~gone gone gone~']);
    expect(renderSlackChunks(`# ${words('head', 6)}`, 16)).toEqual(['*head head head*', '*head head head*']);
  });

  it('inline code is cut at its spaces, which stay inside the code', () => {
    expect(renderSlackChunks(`\`${words('code', 6)}\``, 16)).toEqual(['`code code `', '`code code `', '`code code`']);
  });

  it('a link longer than a message becomes two links to the same address', () => {
    expect(renderSlackChunks(`[${words('word', 6)}](https://e.com)`, 40)).toEqual(['<https://e.com|word word word word word>', '<https://e.com|word>']);
  });

  it('a bare link counts with its brackets: 36 characters fit in 36, not in 35', () => {
    const md = `${'x'.repeat(16)} <https://e.com/abc>`;
    expect(renderSlackChunks(md, 36)).toEqual(['xxxxxxxxxxxxxxxx <https://e.com/abc>']);
    expect(renderSlackChunks(md, 35)).toEqual(['xxxxxxxxxxxxxxxx', '<https://e.com/abc>']);
  });
});
