import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ids, startDiscordWorld, type DiscordWorld } from './setup.ts';

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(' ');

describe('discord long replies through the whole gateway (real discord.js, fake Discord)', () => {
  let world: DiscordWorld;
  beforeAll(async () => {
    // Replies sent whole, as split for Discord (streamed replies are tested in live.test.ts).
    world = await startDiscordWorld({ channels: { discord: { streaming: 'off' } } });
  });
  afterAll(async () => {
    await world.close();
  });

  /** Has the model answer `text` in the DM and returns the messages posted, once the one ending it arrived. */
  async function answer(text: string, last: string): Promise<string[]> {
    expect(world.discord.posts(ids.dm).some((c) => String(c.body?.content).includes(last))).toBe(false);
    const before = world.discord.posts(ids.dm).length;
    world.openai.script.push({ content: text });
    world.discord.message({ channel_id: ids.dm, content: 'go on' });
    await world.reply(ids.dm, (c) => String(c.body?.content).includes(last));
    const chunks = world.discord.posts(ids.dm).slice(before).map((c) => String(c.body?.content));
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(2000);
    return chunks;
  }

  const spans = ['[the docs](https://example.com/docs)', '`npm run build --verbose`', '**the really important part**', '||a spoiler for later||'];
  for (const [n, span] of spans.entries()) {
    it(`a line longer than a message is not cut inside ${span}, which fits in one`, async () => {
      const filler = 'x'.repeat(2000 - Math.floor(span.length / 2)); // the span straddles character 2000
      const text = `${filler} ${span} ${words('z', 100)} END1${n}`;
      const chunks = await answer(text, `END1${n}`);
      expect(chunks).toHaveLength(2);
      expect(chunks[0]).toBe(filler);
      expect(chunks[1]!.startsWith(span)).toBe(true);
    });
  }

  it('bold longer than a message is closed at the end of one and reopened at the start of the next', async () => {
    const bold = words('b', 1000);
    const chunks = await answer(`Intro. **${bold}** END2`, 'END2');
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    expect(chunks[0]!.endsWith('**')).toBe(true);
    for (const chunk of chunks.slice(1, -1)) expect(chunk.startsWith('**') && chunk.endsWith('**')).toBe(true);
    for (const chunk of chunks) expect((chunk.match(/\*\*/g) ?? []).length % 2).toBe(0);
    expect(chunks.join(' ').replace(/\*\*/g, '').split(/\s+/)).toEqual(`Intro. ${bold} END2`.split(/\s+/));
  });

  it('a link to a 5,000-character URL becomes its text and the URL, never a message per character', async () => {
    const url = `https://example.com/${'segment/'.repeat(625)}`;
    const chunks = await answer(`Read [the report](${url}) first. END3`, 'END3');
    expect(chunks.length).toBeLessThanOrEqual(4);
    expect(chunks.join('').replace(/\s+/g, '')).toBe(`Read the report (${url}) first. END3`.replace(/\s+/g, ''));
  });

  it('an unbroken emoji run is cut between whole emoji only', async () => {
    const run = ['👨‍👩‍👧‍👦', '🇯🇵', '👩🏽‍💻'].join('').repeat(200);
    const chunks = await answer(`${run} END4`, 'END4');
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.join('')).toBe(`${run} END4`);
    for (let i = 1; i < chunks.length; i++) {
      const a = chunks[i - 1]!.slice(-12);
      expect([...segmenter.segment(a + chunks[i]!.slice(0, 12))].map((s) => s.index)).toContain(a.length);
    }
  });

  it('an unclosed code block in a quote ends with the quote: the long paragraph after it is split as prose', async () => {
    const paragraph = words('p', 500);
    const chunks = await answer(`> \`\`\`\n> code\n${paragraph} END5`, 'END5');
    expect(chunks[0]!.startsWith('> ```\n> code\n> ```\np0 p1 ')).toBe(true);
    expect(chunks.length).toBe(2);
    expect(chunks.join(' ').replace(/^> ```\n> code\n> ```\n/, '').split(/\s+/)).toEqual(`${paragraph} END5`.split(/\s+/));
  });

  it('a quoted line longer than a message is quoted in every message', async () => {
    const quoted = words('q', 700);
    const chunks = await answer(`> ${quoted} END6`, 'END6');
    expect(chunks.length).toBe(2);
    for (const chunk of chunks) expect(chunk.startsWith('> q')).toBe(true);
    expect(chunks.map((c) => c.slice(2)).join(' ').split(/\s+/)).toEqual(`${quoted} END6`.split(/\s+/));
  });

  it('a mention too long to be one (a 3,000-digit id) is text, split like any word', async () => {
    const chunks = await answer(`<@${'1'.repeat(3000)}> END7`, 'END7');
    expect(chunks.length).toBe(2);
    expect(chunks.join('')).toBe(`<@${'1'.repeat(3000)}> END7`);
  });
});
