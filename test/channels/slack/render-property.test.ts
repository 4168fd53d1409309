import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { renderMrkdwn, renderSlackChunks, SLACK_TEXT_LIMIT } from '../../../channels/slack/render.ts';
import { cutsCluster, limitFor, LONE_SURROGATE, markdownCase, missingFragment, fcParameters, PROPERTY_TIMEOUT_MS, unbalancedDelimiter, unquotedLine } from '../markdown-arbitrary.ts';

/** Markup problems of one mrkdwn message: unclosed code blocks, broken links, unpaired emphasis. */
function markupError(message: string): string | undefined {
  const chunk = message.replace(/^[ \t]*((> ?)+|• |\d+\. )?[ \t]*/gm, ''); // quote markers, list markers, indentation
  const fences = chunk.split('\n').filter((l) => l.trim() === '```').length;
  if (fences % 2) return 'unclosed code block';
  const prose = chunk.replace(/```\n[\s\S]*?\n\s*```/g, ' ').replace(/^[ \t]*(> ?)+/gm, ''); // quote markers
  const outsideLinks = prose.replace(/<[^<>\s|]+(\|[^<>]*)?>/g, 'L');
  if (/[<>]/.test(outsideLinks)) return 'a < or > that is not a whole link';
  if ((outsideLinks.match(/`/g) ?? []).length % 2) return 'unclosed inline code';
  return unbalancedDelimiter(outsideLinks.replace(/`[^`]*`/g, 'C'), /[*_~]/g);
}

/** What Slack shows: link labels (or the URL), entities decoded, markup dropped. */
function visible(chunk: string): string {
  return chunk.split('\n').filter((l) => l.trim() !== '```').map((l) => l.replace(/^[ \t]*(> ?)+/, '')).join('\n')
    .replace(/<([^<>|]+)\|([^<>]*)>/g, '$2').replace(/<([^<>]+)>/g, '$1')
    .replace(/[*_~`]/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

const squeeze = (s: string) => s.replace(/\s+/g, '');


/** A message that starts a code block (or a part of one), after a quote or list prefix. */
const CODE_PART_START = /^(?:[ \t>•\d.)*+-]*)```/;
/** A message that ends with a code block's (or part's) closing fence. */
const CODE_PART_END = /```$/;
describe('Slack rendering, property-based (fast-check)', () => {
  it('every message is within the limit, its markup is whole, and the text survives whole and in order', () => {
    const cases = markdownCase({ emphasis: ['**', '*', '_', '~~'], bareUrlIsText: true, emptyLinkShowsUrl: true, slackSyntax: true });
    fc.assert(fc.property(cases, limitFor(SLACK_TEXT_LIMIT), ({ markdown, fragments }, limit) => {
      const chunks = renderSlackChunks(markdown, limit);
      for (const [i, chunk] of chunks.entries()) {
        expect(chunk.length).toBeLessThanOrEqual(limit);
        expect(visible(chunk).trim()).not.toBe('');
        expect(chunk).not.toMatch(LONE_SURROGATE);
        expect(markupError(chunk), chunk.slice(0, 300)).toBeUndefined();
        expect(unquotedLine(chunk), chunk.slice(0, 300)).toBeUndefined();
        // A link in Slack's syntax shown as text (`&lt;https://…`) is broken.
        expect(visible(chunk)).not.toMatch(/<https?:/);
        if (i > 0) expect(cutsCluster(chunks[i - 1]!, chunk)).toBe(false);
        // A message ends early only to keep something whole that then fills most of the next one.
        // (or a code block too long for one message starts a message of its own, and a part of it ends at a
        // code line before a line too long to join it: the same exceptions as Telegram's).
        const codeLineEnd = CODE_PART_END.test(chunks[i - 1] ?? '') && CODE_PART_START.test(chunk);
        const blockGoesOn = CODE_PART_START.test(chunk) && CODE_PART_END.test(chunk) && CODE_PART_START.test(chunks[i + 1] ?? '');
        if (i > 0 && !codeLineEnd && !blockGoesOn) expect(chunks[i - 1]!.length + chunk.length).toBeGreaterThan(limit / 4);
      }
      const shown = chunks.map(visible);
      expect(missingFragment(shown.join('\n'), fragments)).toBeUndefined();
      expect(squeeze(shown.join(''))).toBe(squeeze(visible(renderMrkdwn(markdown, limit))));
    }), fcParameters(2000));
  }, PROPERTY_TIMEOUT_MS);
});
