import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningGateway } from '../../../src/main.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../fakes/fake-openai.ts';
import { dmEvent, eventCallback, startFakeSlack, type FakeSlack } from '../../fakes/fake-slack.ts';
import { startTestGateway, tempDir } from '../../helpers/gateway.ts';
import { BOT_TOKEN, postSlack, SIGNING_SECRET } from './helpers.ts';

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(' ');

describe('Slack replies through the whole gateway (real bolt, fake Slack Web API)', () => {
  let slack: FakeSlack;
  let llm: FakeOpenAI;
  let tmp: ReturnType<typeof tempDir>;
  let gw: RunningGateway;

  beforeAll(async () => {
    slack = await startFakeSlack();
    llm = await startFakeOpenAI(() => ({ content: 'unexpected' }));
    tmp = tempDir();
    gw = await startTestGateway({
      dir: tmp.dir,
      env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: slack.apiUrl, OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'sk-test' },
      config: { channels: { slack: { mode: 'http', dmPolicy: 'open', streaming: 'off' } } },
    });
  });
  afterAll(async () => {
    await gw.stop();
    await slack.close();
    await llm.close();
    tmp.remove();
  });

  /** Has the model answer `text` in a DM; returns the `text` of every chat.postMessage of the reply. */
  async function answer(text: string, last: string): Promise<string[]> {
    const before = slack.callsOf('chat.postMessage').length;
    llm.script.push({ content: text });
    expect((await postSlack(gw, eventCallback(dmEvent('go on')))).status).toBe(200);
    await slack.waitFor('chat.postMessage', (c) => String(c.body.text).includes(last));
    const chunks = slack.callsOf('chat.postMessage').slice(before).map((c) => String(c.body.text));
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(4000);
      expect(chunk).not.toMatch(LONE_SURROGATE);
    }
    return chunks;
  }

  it('keeps links already in Slack syntax as links, and still neutralizes mentions and broadcasts', async () => {
    const chunks = await answer('See <https://example.com|docs>, <https://example.com/guide?a=1&b=2|the full guide> and <#C0123ABC|general>. <!here> <!channel> <@U0123> END1', 'END1');
    expect(chunks).toEqual([
      'See <https://example.com|docs>, <https://example.com/guide?a=1&amp;b=2|the full guide> and <#C0123ABC|general>. &lt;!here&gt; &lt;!channel&gt; &lt;@U0123&gt; END1',
    ]);
  });

  const spans: [string, string][] = [
    ['[the docs](https://example.com/docs)', '<https://example.com/docs|the docs>'],
    ['`npm run build --verbose`', '`npm run build --verbose`'],
    ['**the really important part**', '*the really important part*'],
    ['_an aside in italics_', '_an aside in italics_'],
  ];
  for (const [n, [markdown, mrkdwn]] of spans.entries()) {
    it(`a line longer than a message is not cut inside ${mrkdwn}, which fits in one`, async () => {
      const filler = 'x'.repeat(4000 - Math.floor(mrkdwn.length / 2)); // the span straddles character 4000
      const chunks = await answer(`${filler} ${markdown} ${words('z', 100)} END2${n}`, `END2${n}`);
      expect(chunks).toHaveLength(2);
      expect(chunks[0]).toBe(filler);
      expect(chunks[1]!.startsWith(mrkdwn)).toBe(true);
    });
  }

  it('bold longer than a message is closed at the end of one and reopened at the start of the next', async () => {
    const bold = words('b', 1800);
    const chunks = await answer(`Intro. **${bold}** END3`, 'END3');
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    expect(chunks[0]!.startsWith('Intro. *b0 ') && chunks[0]!.endsWith('*')).toBe(true);
    for (const chunk of chunks.slice(1, -1)) expect(/^\*\S[\s\S]*\S\*$/.test(chunk)).toBe(true);
    expect(chunks.join(' ').replace(/\*/g, '').split(/\s+/)).toEqual(`Intro. ${bold} END3`.split(/\s+/));
  });

  it('a link to a 5,000-character URL becomes its text and the URL', async () => {
    const url = `https://example.com/${'segment/'.repeat(625)}`;
    const chunks = await answer(`Read [the report](${url}) first. END4`, 'END4');
    expect(chunks.length).toBeLessThanOrEqual(3);
    expect(chunks.join('').replace(/\s+/g, '')).toBe(`Read the report (${url}) first. END4`.replace(/\s+/g, ''));
  });

  it('an unbroken run of emoji is cut between whole emoji: no lone surrogate, no broken family', async () => {
    const run = `${'😀'.repeat(1999)}${['👨‍👩‍👧‍👦', '🇫🇷', '👍🏽'].join('').repeat(300)}`;
    const chunks = await answer(`${run} END5`, 'END5');
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.join('')).toBe(`${run} END5`);
    for (let i = 1; i < chunks.length; i++) {
      const a = chunks[i - 1]!.slice(-12);
      expect([...segmenter.segment(a + chunks[i]!.slice(0, 12))].map((s) => s.index)).toContain(a.length);
    }
  });

  it('Slack links with encoded characters or emphasis in the label stay links; a quoted code block cut in two stays quoted', async () => {
    const links = await answer('<https://x.io/a%20b|docs> <https://x.io/a%7Cb|*bold* docs> END6', 'END6');
    expect(links).toEqual(['<https://x.io/a%20b|docs> <https://x.io/a%7Cb|*bold* docs> END6']);
    const code = Array.from({ length: 300 }, (_, i) => `> line ${String(i).padStart(3, '0')} ${'x'.repeat(10)}`).join('\n');
    const chunks = await answer(`> \`\`\`\n${code}\n> \`\`\`\n\nEND7`, 'END7');
    expect(chunks.length).toBe(2);
    for (const chunk of chunks.slice(0, -1)) {
      expect(chunk.startsWith('> ```\n> line ')).toBe(true);
      expect(chunk.endsWith('\n> ```')).toBe(true);
      expect(chunk.split('\n').every((l) => l.startsWith('> '))).toBe(true);
    }
  });
});
