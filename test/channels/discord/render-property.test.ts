import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DISCORD_MESSAGE_LIMIT, splitDiscordText } from '../../../channels/discord/render.ts';
import { cutsCluster, limitFor, LONE_SURROGATE, markdownCase, missingFragment, fcParameters, PROPERTY_TIMEOUT_MS, unbalancedDelimiter, unquotedLine } from '../markdown-arbitrary.ts';

const FENCE_LINE = /^\s*(> )?([-*+] |\d+\. )?\s*(```|~~~)/;
const LINK = /\[([^[\]]*)\]\(([^()\s]*)\)/g;

/** Markup problems of one Discord message: unclosed code blocks or spans, broken links, unpaired emphasis. */
function markupError(chunk: string): string | undefined {
  const lines = chunk.split('\n');
  if (lines.filter((l) => FENCE_LINE.test(l)).length % 2) return 'unclosed code block';
  let inFence = false;
  const prose = lines.filter((l) => {
    if (FENCE_LINE.test(l)) inFence = !inFence;
    else return !inFence;
    return false;
  }).join('\n');
  if ((prose.match(/`/g) ?? []).length % 2) return 'unclosed inline code';
  const rest = prose.replace(/`[^`]*`/g, 'C').replace(LINK, 'L');
  if (/[[\]]/.test(rest)) return 'a broken link';
  return unbalancedDelimiter(rest.replace(/^[ \t]*(> ?)+/gm, ''), /\*\*|\*|_|~~|\|\|/g);
}

/** The visible text of Discord markdown, link targets left out and markup characters dropped. */
function visible(markdown: string, longUrl = Infinity): string {
  let inFence = false;
  return markdown.split('\n').filter((l) => (FENCE_LINE.test(l) ? ((inFence = !inFence), false) : true)).map((l) => l.replace(/^[ \t]*>[ \t]?/, '')).join('\n')
    .replace(LINK, (_m, label: string, url: string) => (url.length > longUrl ? `${label} ${url}` : label))
    .replace(/[*_~|`[\]()]/g, '').replace(/\\([>#-])/g, '$1');
}

const squeeze = (s: string) => s.replace(/\s+/g, '');


/** A message that starts a code block (or a part of one), after a quote or list prefix. */
const CODE_PART_START = /^(?:[ \t>•\d.)*+-]*)```/;
/** A message that ends with a code block's (or part's) closing fence. */
const CODE_PART_END = /```$/;
describe('Discord rendering, property-based (fast-check)', () => {
  it('every message is within the limit, its markup is whole, and the text survives whole and in order', () => {
    const cases = markdownCase({ emphasis: ['**', '*', '_', '~~', '||'], bareUrlIsText: true });
    fc.assert(fc.property(cases, limitFor(DISCORD_MESSAGE_LIMIT), ({ markdown, fragments }, limit) => {
      const chunks = splitDiscordText(markdown, limit);
      for (const [i, chunk] of chunks.entries()) {
        expect(chunk.length).toBeLessThanOrEqual(limit);
        // Parentheses outside a link are text (the `)` that ends a long URL written out may be a message of its own).
        expect(visible(chunk).trim() || chunk.replace(LINK, '').replace(/[^()]/g, '')).not.toBe('');
        expect(chunk).not.toMatch(LONE_SURROGATE);
        // A reply that fits is sent as the model wrote it, an unclosed block included.
        if (chunk !== markdown.replace(/\r\n?/g, '\n')) expect(markupError(chunk), chunk.slice(0, 300)).toBeUndefined();
        expect(unquotedLine(chunk), chunk.slice(0, 300)).toBeUndefined();
        if (i > 0) expect(cutsCluster(chunks[i - 1]!, chunk)).toBe(false);
        // A message ends early only to keep something whole that then fills most of the next one.
        // (or a code block too long for one message starts a message of its own, and a part of it ends at a
        // code line before a line too long to join it: the same exceptions as Telegram's).
        const codeLineEnd = CODE_PART_END.test(chunks[i - 1] ?? '') && CODE_PART_START.test(chunk);
        const blockGoesOn = CODE_PART_START.test(chunk) && CODE_PART_END.test(chunk) && CODE_PART_START.test(chunks[i + 1] ?? '');
        if (i > 0 && !codeLineEnd && !blockGoesOn) expect(chunks[i - 1]!.length + chunk.length).toBeGreaterThan(limit / 4);
      }
      const shown = chunks.map((c) => visible(c));
      const strip = (s: string) => s.replace(/[*_~|`[\]()]/g, '');
      expect(missingFragment(shown.join('\n'), fragments, strip)).toBeUndefined();
      const source = markdown.replace(/\r\n?/g, '\n');
      const expected = source.length <= limit ? visible(source) : visible(source, Math.floor(limit / 2));
      expect(squeeze(shown.join(''))).toBe(squeeze(expected));
    }), fcParameters(2000));
  }, PROPERTY_TIMEOUT_MS);
});
